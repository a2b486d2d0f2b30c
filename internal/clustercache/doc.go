// Package clustercache is the cache of target-cluster clients and objects, shaped like
// cluster-api's clustercache: a ClusterCache interface (GetReader, Track, Untrack, Watch,
// Forget), one implementation (Cache) with a lifecycle, and a fake (package fake).
//
// # Setup
//
// The observer builds one Cache and adds it to its manager, which starts it on every
// replica and stops it at shutdown (cancelling every informer and Secret watch and
// waiting for them):
//
//	cc := clustercache.New(clustercache.Options{Local: cfg, SecretReader: live, Secrets: cs, Watch: true})
//	if err := mgr.Add(cc); err != nil { ... }
//
// Without Watch every read is a GET. convoy-api never builds one: it holds no target
// credentials (its /health is built from the ReleaseInventory alone).
//
// # Usage
//
//	cc.Watch(enqueueRelease, enqueueReleasesOfCluster)
//	reader, err := cc.GetReader(ctx, cluster) // errors.Is(err, clustercache.ErrClusterNotConnected)
//	cc.Track("ns/release", cluster, refs)     // what the pass reads: starts or stops informers
//	obj, err := reader.Get(ctx, gvr, namespace, name)
//
// # Implementation
//
// The cache keeps one index of which Release reads which object (index.go). From it
// come the Releases that a changed object wakes, and per cluster the types and
// namespaces that informers must cover: one informer per type and namespace, or one for
// all namespaces above Options.NamespaceThreshold (with hysteresis). Informers hold the
// objects as compact JSON without managedFields and the last-applied annotation. A read
// answers from a synced informer, and waits for one whose first list is under way
// while the server answers (a stalled list makes it probe /version, once per SyncWait
// for the cluster); anything it cannot trust (not synced within syncWaitLimit
// SyncWaits or silent for silentLimit, not watched, a broken watch, a miss, a type
// whose list or watch is refused) is read with a GET, so a cache never answers "not
// found" from an informer that has not synced. A cluster that does not answer is held down for
// Options.HoldDown. Every time-based decision uses Options.Clock.
//
// Trade-off: cluster-api runs a controller-runtime cache per cluster and watches whole
// types; this cache watches only the namespaces and types that Releases record, at the
// cost of its own informer management (targets.go).
package clustercache
