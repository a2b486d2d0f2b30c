package clustercache

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestWatchFollowsTrackedTypes: a type that a Release starts to record starts an
// informer (per namespace, all namespaces above the threshold), reads come from it with
// no GET, managedFields and the last-applied annotation are not cached, a change calls
// the callback of the Release that reads it, and the informer stops when nothing names the type any more.
func TestWatchFollowsTrackedTypes(t *testing.T) {
	ns1, ns2, ns3 := namespace(t), namespace(t), namespace(t)
	configMap(t, ns1, "a", "1")
	configMap(t, ns2, "b", "1")
	configMap(t, ns3, "c", "1")
	log := &requestLog{}
	var events sync.Map
	cache := New(Options{Local: log.wrap(env.Config), Watch: true, NamespaceThreshold: 2})
	cache.Watch(func(release string) { events.Store(release, true) }, nil)
	cluster := localCluster("watch")
	key := toolscache.MetaObjectToName(cluster).String()
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r1", cluster, []TargetRef{cmRef(ns1, "a")})
	cache.Track("ns/r2", cluster, []TargetRef{cmRef(ns2, "b")})
	want := []string{"configmaps in " + ns1, "configmaps in " + ns2}
	slices.Sort(want)
	if got := cache.Scopes(key); !slices.Equal(got, want) {
		t.Fatalf("scopes = %v, want %v", got, want)
	}
	obj, err := reader.Get(context.Background(), gvrConfigMaps, ns1, "a")
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetManagedFields() != nil || obj.GetAnnotations()[lastAppliedAnnotation] != "" || obj.GetAnnotations()["keep"] != "me" {
		t.Fatalf("cached object not stripped as expected: managedFields=%v annotations=%v", obj.GetManagedFields(), obj.GetAnnotations())
	}
	gets := log.count("get")
	for i := 0; i < 5; i++ {
		if _, err := reader.Get(context.Background(), gvrConfigMaps, ns2, "b"); err != nil {
			t.Fatal(err)
		}
	}
	if d := log.count("get") - gets; d != 0 {
		t.Fatalf("%d GETs for reads of a watched, synced type; want 0", d)
	}

	configMap(t, ns1, "a", "2")
	eventually(t, "the update of "+ns1+"/a to wake ns/r1", func() bool { _, ok := events.Load("ns/r1"); return ok })
	if _, ok := events.Load("ns/r2"); ok {
		t.Fatal("the update of " + ns1 + "/a woke ns/r2, which does not read it")
	}
	eventually(t, "the cache to see the update", func() bool {
		o, err := reader.Get(context.Background(), gvrConfigMaps, ns1, "a")
		return err == nil && o.Object["data"].(map[string]any)["v"] == "2"
	})

	// A third namespace crosses the threshold: one informer for all namespaces.
	cache.Track("ns/r3", cluster, []TargetRef{cmRef(ns3, "c")})
	if got, want := cache.Scopes(key), []string{"configmaps (all namespaces)"}; !slices.Equal(got, want) {
		t.Fatalf("scopes above the threshold = %v, want %v", got, want)
	}
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns3, "c"); err != nil {
		t.Fatal(err)
	}

	for _, r := range []string{"ns/r1", "ns/r2", "ns/r3"} {
		cache.Track(r, cluster, nil)
	}
	if got := cache.Scopes(key); len(got) != 0 {
		t.Fatalf("scopes after every Release dropped the type = %v, want none", got)
	}
	// Unwatched now: a GET answers.
	gets = log.count("get")
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns1, "a"); err != nil {
		t.Fatal(err)
	}
	if log.count("get") != gets+1 {
		t.Fatal("a read of an unwatched type did not GET")
	}
}

// TestFirstListIsAPlainList: an informer of targets starts with a list that the API
// server answers from its watch cache ("0"), not with a watch that streams the first
// list: that stream waits until the watch cache is as fresh as etcd, which on a busy
// server delayed every first read by 10–13 s (listThenWatch).
func TestFirstListIsAPlainList(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	log := &requestLog{}
	cache := New(Options{Local: log.wrap(env.Config), Watch: true})
	t.Cleanup(cache.Stop)
	cluster := localCluster("plain-list")
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	gets := log.count("get")
	cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a")})
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer's watch after its list", func() bool { return log.count("watch") >= 1 })
	if n := log.count("streamed list"); n != 0 {
		t.Errorf("%d watches streamed a first list; want a plain list", n)
	}
	if n := log.count("list from the watch cache"); n != 1 {
		t.Errorf("%d lists with resourceVersion 0; want 1, the informer's first", n)
	}
	if n := log.count("get") - gets; n != 0 {
		t.Errorf("%d GETs; want the read answered by the informer", n)
	}
}

// TestForbiddenTypeFallsBackToGets: an identity that may get ConfigMaps but not list or
// watch them reads them with GETs (with the fallback metric), not as Unknown.
func TestForbiddenTypeFallsBackToGets(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	ctx := context.Background()
	cfg := getOnlyConfig(t, ns, "configmaps")
	// The restricted identity is the config's own (it may not impersonate).
	cache := New(Options{Local: cfg, Watch: true, UnsafeReadAsObserver: true})
	cluster := localCluster("forbidden-" + ns)
	reader, err := cache.GetReader(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a")})
	obj, err := reader.Get(ctx, gvrConfigMaps, ns, "a")
	if err != nil || obj.GetName() != "a" {
		t.Fatalf("read of a type that may not be listed: %v, %v; want the object from a GET", obj, err)
	}
	fallbacks := watchFallbacks.WithLabelValues(toolscache.MetaObjectToName(cluster).String())
	eventually(t, "the fallback to GETs", func() bool {
		return testutil.ToFloat64(fallbacks) == 1 && len(cache.Scopes(toolscache.MetaObjectToName(cluster).String())) == 0
	})
	before := testutil.ToFloat64(targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceFallback))
	if _, err := reader.Get(ctx, gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceFallback)); got != before+1 {
		t.Fatalf("fallback reads = %v, want %v", got, before+1)
	}
	if _, err := reader.Get(ctx, gvrConfigMaps, ns, "missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("a missing object through the fallback: %v, want NotFound", err)
	}
}

// TestUnsyncedCacheNeverAnswersNotFound: while an informer's first list has not
// returned, a read never answers from the empty cache. On a server that answers /version
// it waits for the list (here held for 2 SyncWaits) instead of sending a GET of its own,
// and answers from the cache once the list is in; a list silent for silentLimit
// SyncWaits is given up, and the read GETs the object.
func TestUnsyncedCacheNeverAnswersNotFound(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	log := &requestLog{}
	log.holdLists.Store(true)
	defer log.holdLists.Store(false)
	cache := New(Options{Local: log.wrap(env.Config), Watch: true, SyncWait: 500 * time.Millisecond})
	cluster := localCluster("unsynced")
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a")})
	notSynced := targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceNotSynced)
	type answer struct {
		obj *unstructured.Unstructured
		err error
	}
	done := make(chan answer, 1)
	go func() {
		obj, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a")
		done <- answer{obj, err}
	}()
	time.Sleep(time.Second)
	select {
	case a := <-done:
		t.Fatalf("a read answered %v, %v while the first list was held; want it to wait", a.obj, a.err)
	default:
	}
	if obj, ok := reader.(CachedReader).GetCached(gvrConfigMaps, ns, "a"); ok {
		t.Fatalf("GetCached answered %v while the first list was held; want false", obj)
	}
	log.holdLists.Store(false)
	a := <-done
	if a.err != nil || a.obj.GetName() != "a" {
		t.Fatalf("read after the list came in: %v, %v; want the object", a.obj, a.err)
	}
	if log.count("get") != 0 || log.count("version") == 0 || testutil.ToFloat64(notSynced) != 0 {
		t.Fatalf("GETs = %d, probes = %d, not-synced reads = %v; want the read to wait for the list after probing the server",
			log.count("get"), log.count("version"), testutil.ToFloat64(notSynced))
	}

	log.holdLists.Store(true)
	slow := localCluster("unsynced-long")
	reader, err = cache.GetReader(context.Background(), slow)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r2", slow, []TargetRef{cmRef(ns, "a")})
	obj, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a")
	if err != nil || obj.GetName() != "a" {
		t.Fatalf("read of a list held silent past the wait's limit: %v, %v; want the object", obj, err)
	}
	if log.count("get") == 0 {
		t.Fatal("a read of a list held silent past the wait's limit found the object without a GET")
	}
}

// TestMissInSyncedCacheIsConfirmed: an object created after the informer synced and
// read before its watch event arrives (the inventory can record it first) is found with
// a GET, not reported missing; a really missing object is NotFound.
func TestMissInSyncedCacheIsConfirmed(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	cache := New(Options{Local: env.Config, Watch: true})
	cluster := localCluster("miss")
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a"), cmRef(ns, "late")})
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}
	misses := targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceMiss)
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns, "late"); !apierrors.IsNotFound(err) {
		t.Fatalf("missing object: %v, want NotFound", err)
	}
	if testutil.ToFloat64(misses) != 1 {
		t.Fatalf("miss reads = %v, want 1", testutil.ToFloat64(misses))
	}
}

// TestGetCachedAnswersOnlyFromMemory: GetCached answers an object that a synced
// informer holds, counted as a read of source "cache", and says false, counting nothing,
// for a type that is not watched and for an object the synced cache does not hold (Get
// confirms those with a GET).
func TestGetCachedAnswersOnlyFromMemory(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	cache := New(Options{Local: env.Config, Watch: true})
	cluster := localCluster("cached")
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	cached := reader.(CachedReader)
	if obj, ok := cached.GetCached(gvrConfigMaps, ns, "a"); ok {
		t.Fatalf("GetCached of a type not watched answered %v; want false", obj)
	}
	cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a"), cmRef(ns, "late")})
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a"); err != nil { // waits for the first list
		t.Fatal(err)
	}
	hits := targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceCache)
	before := testutil.ToFloat64(hits)
	obj, ok := cached.GetCached(gvrConfigMaps, ns, "a")
	if !ok {
		t.Fatal("GetCached of a cached object = false; want the object")
	}
	if v, _, _ := unstructured.NestedString(obj.Object, "data", "v"); obj.GetName() != "a" || v != "1" {
		t.Fatalf("GetCached of a cached object = %v; want ConfigMap a with v=1", obj)
	}
	if obj, ok := cached.GetCached(gvrConfigMaps, ns, "late"); ok {
		t.Fatalf("GetCached of an object the cache does not hold answered %v; want false", obj)
	}
	if got := testutil.ToFloat64(hits) - before; got != 1 {
		t.Fatalf("cache reads counted = %v, want 1 (the hit only)", got)
	}
}

// TestKubeconfigSecretRotation: the kubeconfig Secret is watched, not read with GETs
// (no SecretReader at all); replacing it rebuilds the cluster's clients and informers
// and calls the cluster callback; a deleted Secret makes the cluster not connected.
func TestKubeconfigSecretRotation(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	configMap(t, ns, "a", "1")
	kc1, err := env.UserKubeconfig("rot1-"+ns, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	kc2, err := env.UserKubeconfig("rot2-"+ns, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kc"}, Data: map[string][]byte{"value": kc1}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var woken sync.Map
	cache := New(Options{Secrets: cs, Watch: true})
	cache.Watch(nil, func(namespace, name string) { woken.Store(namespace+"/"+name, true) })
	cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remote"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "kc"}}}
	r1, err := cache.GetReader(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track(ns+"/app", cluster, []TargetRef{cmRef(ns, "a")})
	if _, err := r1.Get(ctx, gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}
	if again, err := cache.GetReader(ctx, cluster); err != nil || again != r1 {
		t.Fatalf("a second pass rebuilt the clients of an unchanged Cluster (%v)", err)
	}
	if got := cache.secrets.watched(); !slices.Equal(got, []string{ns + "/kc"}) {
		t.Fatalf("watched Secrets = %v", got)
	}

	secret.Data = map[string][]byte{"value": kc2}
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rotation to wake the Cluster's Releases", func() bool { _, ok := woken.Load(ns + "/remote"); return ok })
	r2, err := cache.GetReader(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if r2 == r1 {
		t.Fatal("the rotated Secret did not rebuild the cluster's reader")
	}
	if got := cache.Scopes(toolscache.MetaObjectToName(cluster).String()); !slices.Equal(got, []string{"configmaps in " + ns}) {
		t.Fatalf("scopes after the rebuild = %v: the Releases' interest was not carried over", got)
	}
	if _, err := r2.Get(ctx, gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}

	woken.Delete(ns + "/remote")
	if err := env.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion to wake the Cluster's Releases", func() bool { _, ok := woken.Load(ns + "/remote"); return ok })
	if _, err := cache.GetReader(ctx, cluster); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("Cluster whose Secret is gone: %v, want a not-found ErrClusterNotConnected", err)
	}
	cache.Forget(ns, "remote")
	if got := cache.secrets.watched(); len(got) != 0 {
		t.Fatalf("Secrets still watched after the Cluster was forgotten: %v", got)
	}
}

// TestRefusedTypeIsWatchedAgain: once FallbackRetry has passed, the next Track tries to
// watch a type that fell back to GETs again, even when what the Release reads did not
// change (a steady pass changes nothing in the index, but the retry is still due).
func TestRefusedTypeIsWatchedAgain(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	cfg := getOnlyConfig(t, ns, "configmaps")
	cache := New(Options{Local: cfg, Watch: true, UnsafeReadAsObserver: true, FallbackRetry: 200 * time.Millisecond})
	cluster := localCluster("retry-" + ns)
	if _, err := cache.GetReader(context.Background(), cluster); err != nil {
		t.Fatal(err)
	}
	refs := []TargetRef{cmRef(ns, "a")}
	cache.Track("ns/r", cluster, refs)
	fallbacks := watchFallbacks.WithLabelValues(toolscache.MetaObjectToName(cluster).String())
	eventually(t, "the fallback to GETs", func() bool { return testutil.ToFloat64(fallbacks) == 1 })
	eventually(t, "a second try to watch, refused again", func() bool {
		cache.Track("ns/r", cluster, refs) // the same refs, as a steady pass tracks them
		return testutil.ToFloat64(fallbacks) == 2
	})
}

// TestNamespacedIdentityWatchesPerNamespace: a type recorded in more namespaces than
// the threshold goes to one informer for all namespaces; an identity that may list it
// only in those namespaces (RoleBindings, the usual tenant grant) is refused there, and
// the type is then watched namespace by namespace, read from the cache, not with a GET
// per read.
func TestNamespacedIdentityWatchesPerNamespace(t *testing.T) {
	nss, refs := configMapsIn(t, 3)
	log := &requestLog{}
	cfg := log.wrap(namespacedConfig(t, "per-namespace-"+nss[0], "configmaps", nss...))
	cache := New(Options{Local: cfg, Watch: true, UnsafeReadAsObserver: true, NamespaceThreshold: 2})
	cluster := localCluster("narrow-" + nss[0])
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	key := toolscache.MetaObjectToName(cluster).String()
	var want []string
	for _, ns := range nss {
		want = append(want, "configmaps in "+ns)
	}
	slices.Sort(want)
	eventually(t, "an informer in each namespace, after the one for all namespaces was refused", func() bool {
		cache.Track("ns/r", cluster, refs) // the same refs each time, as steady passes track them
		got := cache.Scopes(key)
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	fallbacks := testutil.ToFloat64(watchFallbacks.WithLabelValues(key))
	eventually(t, "reads from the synced informers", func() bool {
		gets := log.count("get")
		for _, ns := range nss {
			if obj, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a"); err != nil || obj.GetName() != "a" {
				return false
			}
		}
		return log.count("get") == gets
	})
	if fallbacks != 0 {
		t.Errorf("fallbacks to GETs = %v, want 0: the type is watched per namespace", fallbacks)
	}
}

// TestOneRefusedNamespaceStopsTheType: a type whose list is refused in one of the
// namespaces it is read in falls back to GETs as a whole: its informers in the other
// namespaces stop too (at once, not at the next Track that changes what is read), and
// the fallback is counted once.
func TestOneRefusedNamespaceStopsTheType(t *testing.T) {
	nss, refs := configMapsIn(t, 3)
	cfg := namespacedConfig(t, "two-of-three-"+nss[0], "configmaps", nss[:2]...)
	cache := New(Options{Local: cfg, Watch: true, UnsafeReadAsObserver: true})
	cluster := localCluster("refused-one-" + nss[0])
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	key := toolscache.MetaObjectToName(cluster).String()
	fallbacks := watchFallbacks.WithLabelValues(key)
	cache.Track("ns/r", cluster, refs)
	eventually(t, "the type on GETs, with no informer left", func() bool {
		cache.Track("ns/r", cluster, refs) // steady passes
		return testutil.ToFloat64(fallbacks) >= 1 && len(cache.Scopes(key)) == 0
	})
	if got := testutil.ToFloat64(fallbacks); got != 1 {
		t.Errorf("fallbacks = %v, want 1", got)
	}
	for _, ns := range nss[:2] {
		if obj, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a"); err != nil || obj.GetName() != "a" {
			t.Errorf("read in %s through the fallback: %v, %v", ns, obj, err)
		}
	}
}

// TestListForbiddenEverywhereIsNotNarrowedAgain: an identity that may list a type in
// no namespace is refused in all namespaces, then in the namespaces it is narrowed to;
// from then on each retry of the type costs one refused informer start and one
// fallback, not one per namespace.
func TestListForbiddenEverywhereIsNotNarrowedAgain(t *testing.T) {
	nss, refs := configMapsIn(t, 4)
	log := &requestLog{}
	cfg := log.wrap(getOnlyConfig(t, nss[0], "configmaps"))
	cache := New(Options{Local: cfg, Watch: true, UnsafeReadAsObserver: true, NamespaceThreshold: 2, FallbackRetry: 300 * time.Millisecond})
	cluster := localCluster("nolist-" + nss[0])
	if _, err := cache.GetReader(context.Background(), cluster); err != nil {
		t.Fatal(err)
	}
	fallbacks := watchFallbacks.WithLabelValues(toolscache.MetaObjectToName(cluster).String())
	requests := func() int { return log.count("list") + log.count("watch") }
	eventually(t, "a fallback to GETs", func() bool {
		cache.Track("ns/r", cluster, refs)
		return testutil.ToFloat64(fallbacks) >= 1
	})
	firstFallbacks, firstRequests := testutil.ToFloat64(fallbacks), requests()
	eventually(t, "two more retries", func() bool {
		cache.Track("ns/r", cluster, refs) // steady passes
		return testutil.ToFloat64(fallbacks) >= firstFallbacks+2
	})
	// An informer's start is a watch with its initial list and, refused, a list: two
	// requests a retry, and a retry may be under way when counted.
	retries, sent := testutil.ToFloat64(fallbacks)-firstFallbacks, requests()-firstRequests
	if float64(sent) > 2*(retries+1) {
		t.Errorf("%d refused lists and watches for %v retries; want at most two each", sent, retries)
	}
}

// TestExpiredNarrowingBehindFallbackIsDropped: a narrowing that runs out while its type
// is on GETs is dropped by the sync, which then leaves no retry due: steady Tracks do
// not sync on every pass until the fallback ends.
func TestExpiredNarrowingBehindFallbackIsDropped(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := &Options{Clock: clk, FallbackRetry: 5 * time.Minute, NamespaceThreshold: 2}
	w := newTargetWatches(context.Background(), &goroutines{}, "c", nil, nil, opts, nil)
	w.narrow[gvrConfigMaps] = clk.Now().Add(-time.Second)
	w.fallback[gvrConfigMaps] = fallbackState{until: clk.Now().Add(4 * time.Minute)}
	w.sync(map[schema.GroupVersionResource]map[string]int{gvrConfigMaps: {"a": 1, "b": 1, "c": 1}})
	if w.retryDue() {
		t.Error("a retry is due after a sync that changed nothing")
	}
}

// configMapsIn makes n namespaces, each with the ConfigMap a, and returns them and the
// refs of their ConfigMaps.
func configMapsIn(t *testing.T, n int) (nss []string, refs []TargetRef) {
	t.Helper()
	for range n {
		ns := namespace(t)
		configMap(t, ns, "a", "1")
		nss, refs = append(nss, ns), append(refs, cmRef(ns, "a"))
	}
	return nss, refs
}
