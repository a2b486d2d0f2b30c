// Package base is the harness of convoy-observer's health loop on controller-runtime's
// controller: the options of a loop's
// controller (its own rate limiter, workers, panic recovery, leader election), the
// adapter from a sync function of one key to a Reconciler, the predicates and fan-out
// maps that decide which changes add a key (docs/design.md, "Events that add a key"), and the shard gate. The
// target-cluster cache is package clustercache.
//
// A loop is a sync function of one namespace/name key, run by controller-runtime's
// controller through Reconciler, with the watches and predicates of its events:
//
//	ctrl.NewControllerManagedBy(mgr).Named("health").
//		For(&v1alpha1.Release{}, builder.WithPredicates(base.ReleasePredicate())).
//		Watches(&v1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(fanOut.OfCluster), …).
//		WatchesRawSource(enqueuer.Source()). // target changes, rebuilt clusters
//		WithOptions(base.ControllerOptions(workers)).
//		Complete(&base.Reconciler{Sync: h.syncHandler})
//
// The outcomes of a pass map onto the controller's queue: success Forgets the key, a
// transient error is retried with the loop's NewRateLimiter (logged at error level), a
// reconcile.TerminalError is not retried, Result.RequeueAfter Forgets and schedules the
// re-check, and a Quiet error (a lost precondition race, a pass
// cut off by shutdown) is retried with the rate limiter but logged at V(1). Each
// controller gets its own limiter (docs/design.md, "Retries"). The queue is controller-runtime's
// priority queue: the keys of an informer's initial list and resyncs wait behind keys of
// real changes. Package basetest runs a sync function in such a controller one pass at a
// time.
package base
