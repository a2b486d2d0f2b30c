// Package base is the shared harness of convoy-observer's loops (the health loop, and the
// drift loop beside it): a work queue of Release keys with the worker skeleton, the event
// filters that decide which changes add a key, the shard gate, and the target-cluster
// client cache.
//
// A loop is a Controller whose SyncHandler does one pass for one key:
//
//	c := base.NewController("health", workers, h.syncHandler)
//	mgr.Add(c) // runs workers after the caches sync, only on the leader
//	handlers := base.ReleaseEventHandlers(c.Enqueue, lister)
//
// Why its own worker skeleton rather than controller-runtime's Reconciler: the health
// loop needs the three outcomes of STYLE.md (Forget on success, rate-limited retry on a
// transient error, Forget-then-AddAfter for a scheduled re-check; shared/cases 24 and 25)
// with test seams (the sync function, the enqueue function, HasSynced) that tests drive
// directly, and one rate limiter per queue (shared/cases 26).
package base
