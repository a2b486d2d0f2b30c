// Package controllerkit is the queue harness of convoy-observer's health loop on
// controller-runtime's controller: the options of a loop's controller (its own rate
// limiter, workers, panic recovery, leader election), the adapter from a sync function of
// one namespace/name key to a Reconciler, the quiet errors that are retried without an
// error-level line, and the Enqueuer through which changes outside the manager's
// informers add keys. What decides which changes add a key (predicates, fan-out) and the
// shard gate belong to the loop (package healthloop); fairness across namespaces is
// package fairshare; the target-cluster cache is package clustercache.
//
// A loop is a sync function of one namespace/name key, run by controller-runtime's
// controller through Reconciler:
//
//	ctrl.NewControllerManagedBy(mgr).Named("health").
//		For(&v1alpha1.Release{}, builder.WithPredicates(releasePredicate)).
//		WatchesRawSource(enqueuer.Source()). // target changes, rebuilt clusters
//		WithOptions(controllerkit.ControllerOptions(workers)).
//		Complete(&controllerkit.Reconciler{Sync: h.syncHandler})
//
// The outcomes of a pass map onto the controller's queue: success Forgets the key, a
// transient error is retried with the loop's NewRateLimiter (logged at error level), a
// reconcile.TerminalError is not retried, Result.RequeueAfter Forgets and schedules the
// re-check, and a Quiet error (a lost precondition race, a pass cut off by shutdown) is
// retried with the rate limiter but logged at V(1). Each controller gets its own limiter
// (docs/design.md, "Retries"). The queue is controller-runtime's priority queue (or
// fairshare's round-robin over it): the keys of an informer's initial list and resyncs
// wait behind keys of real changes. Package kittest runs a sync function in such a
// controller one pass at a time.
package controllerkit
