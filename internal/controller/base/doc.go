// Package base is the shared harness of convoy-observer's loops (the health loop, and the
// drift loop beside it): a work queue of Release keys with the worker skeleton, the event
// filters that decide which changes add a key, the shard gate, and the target-cluster
// client cache.
//
// The target-cluster cache (ClusterCache with Watch) answers ObjectReader.Get from
// informers, the way cluster-api's clustercache and gitops-engine's cluster cache do,
// but only for what Releases record: the loop declares each Release's objects with
// Track; the cache runs a dynamic informer per resource type and namespace (one for all
// namespaces above a threshold), strips managedFields and the last-applied annotation
// before caching, stops informers that nothing names, and reports each change of an
// object through Notify so that exactly the Releases recording it are queued. Whatever it
// cannot watch (forbidden, unserved, failing, not yet synced) it reads with a GET, never
// answering "not found" from a cache that has not synced:
//
//	cc := base.NewClusterCache(base.ClusterCacheOptions{Local: cfg, Secrets: cs, Watch: true})
//	cc.Notify(onObjectChange, onClusterRebuilt)
//	reader, err := cc.ForCluster(ctx, cluster)
//	cc.Track("ns/release", cluster, refs) // starts or stops informers
//	obj, err := reader.Get(ctx, gvr, namespace, name)
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
