// Package clustercache is the cache of target-cluster clients and objects.
// ClusterCache (with Watch) answers ObjectReader.Get from informers, the way cluster-api's clustercache and gitops-engine's cluster cache do,
// but only for what Releases record: the loop declares each Release's objects with
// Track; the cache runs a dynamic informer per resource type and namespace (one for all
// namespaces above a threshold), strips managedFields and the last-applied annotation
// before caching, stops informers that nothing names, and reports each change of an
// object through Notify so that exactly the Releases recording it are queued. Whatever it
// cannot watch (forbidden, unserved, failing, not yet synced) it reads with a GET, never
// answering "not found" from a cache that has not synced:
//
//	cc := clustercache.NewClusterCache(clustercache.ClusterCacheOptions{Local: cfg, Secrets: cs, Watch: true})
//	cc.Notify(onObjectChange, onClusterRebuilt)
//	reader, err := cc.ForCluster(ctx, cluster)
//	cc.Track("ns/release", cluster, refs) // starts or stops informers
//	obj, err := reader.Get(ctx, gvr, namespace, name)
package clustercache
