package clustercache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// TargetRef names one object that a Release reads from its target cluster: an inventory
// entry or the workload of a polled hook.
type TargetRef struct {
	GVR             schema.GroupVersionResource
	Kind            string
	Namespace, Name string
}

// ObjectEvent tells that a watched target object was added (after its informer's
// initial list), updated (a new resourceVersion) or deleted.
type ObjectEvent struct {
	// Cluster is the Cluster's namespace/name key.
	Cluster         string
	Group, Kind     string
	Namespace, Name string
}

// TargetTracker is implemented by a ClusterClients whose readers are fed by watches.
// The health loop declares what each Release reads; the tracker runs informers for
// those types (and namespaces) and stops those that nothing names any more.
type TargetTracker interface {
	// Track replaces what release (a namespace/name key) reads from cluster with refs.
	Track(release string, cluster *v1alpha1.Cluster, refs []TargetRef)
	// Untrack drops everything release reads.
	Untrack(release string)
	// Notify registers the callbacks of object changes and of a rebuilt cluster (its
	// kubeconfig Secret changed): both wake Releases.
	Notify(objects func(ObjectEvent), clusters func(namespace, name string))
}

// Read sources of a target object, the values of the metric label "source".
const (
	sourceCache       = "cache"
	sourceUnwatched   = "unwatched"    // no informer names this type/namespace
	sourceFallback    = "fallback"     // list/watch forbidden or unserved: GETs
	sourceWatchFailed = "watch-failed" // the informer's last list/watch failed
	sourceNotSynced   = "not-synced"   // the informer did not sync within SyncWait
	sourceMiss        = "miss"         // not in the synced cache: confirmed with a GET
)

// scopeKey is one informer: a resource type in one namespace ("" = all namespaces).
type scopeKey struct {
	gvr       schema.GroupVersionResource
	namespace string
}

func (k scopeKey) String() string {
	if k.namespace == "" {
		return k.gvr.GroupResource().String() + " (all namespaces)"
	}
	return k.gvr.GroupResource().String() + " in " + k.namespace
}

// scopeInformer is one running informer and what its list/watch calls last said.
type scopeInformer struct {
	key      scopeKey
	informer toolscache.SharedIndexInformer
	cancel   context.CancelFunc

	mu      sync.Mutex
	lastErr error // the last list/watch error, cleared by the next success
	// progress is when the informer was started or its list or watch last delivered
	// something (unix nanoseconds): a first list that streams is alive.
	progress atomic.Int64
}

func (s *scopeInformer) touch() { s.progress.Store(time.Now().UnixNano()) }

// stalled reports whether nothing arrived for longer than d.
func (s *scopeInformer) stalled(d time.Duration) bool {
	return time.Since(time.Unix(0, s.progress.Load())) > d
}

func (s *scopeInformer) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

func (s *scopeInformer) setErr(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
}

// targetWatches runs the informers of one target cluster. Interest comes from Track:
// per resource type, the namespaces that recorded objects live in (with a count). A
// type named in at most NamespaceThreshold namespaces gets one informer per namespace
// (memory bounded by what Releases record); more namespaces share one informer for all
// namespaces (watches bounded by the number of types).
type targetWatches struct {
	cluster   string
	client    dynamic.Interface // no client timeout: watches are long requests
	direct    *dynamicReader    // GETs with the hold-down
	opts      *ClusterCacheOptions
	log       logr.Logger
	onObject  func(ObjectEvent)
	ctx       context.Context
	cancelAll context.CancelFunc

	mu        sync.Mutex
	interest  map[string][]TargetRef                         // release → refs
	counts    map[schema.GroupVersionResource]map[string]int // gvr → namespace → refs
	informers map[scopeKey]*scopeInformer                    // running
	fallback  map[schema.GroupVersionResource]fallbackState  // list/watch refused
	wide      map[schema.GroupVersionResource]bool           // currently all-namespaces
}

type fallbackState struct {
	until time.Time
	err   error
}

func newTargetWatches(cluster string, client dynamic.Interface, direct *dynamicReader, opts *ClusterCacheOptions, onObject func(ObjectEvent)) *targetWatches {
	ctx, cancel := context.WithCancel(context.Background())
	return &targetWatches{
		cluster: cluster, client: client, direct: direct, opts: opts, onObject: onObject,
		log: opts.Log.WithValues("cluster", cluster), ctx: ctx, cancelAll: cancel,
		interest:  map[string][]TargetRef{},
		counts:    map[schema.GroupVersionResource]map[string]int{},
		informers: map[scopeKey]*scopeInformer{},
		fallback:  map[schema.GroupVersionResource]fallbackState{},
		wide:      map[schema.GroupVersionResource]bool{},
	}
}

// stop stops every informer of the cluster.
func (w *targetWatches) stop() {
	w.cancelAll()
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, s := range w.informers {
		s.cancel()
		delete(w.informers, k)
	}
	watchedScopes.DeletePartialMatch(map[string]string{"cluster": w.cluster})
}

// set replaces release's refs (nil drops the release) and reconciles the informers.
func (w *targetWatches) set(release string, refs []TargetRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.interest[release] {
		if m := w.counts[r.GVR]; m != nil {
			if m[r.Namespace]--; m[r.Namespace] <= 0 {
				delete(m, r.Namespace)
			}
			if len(m) == 0 {
				delete(w.counts, r.GVR)
			}
		}
	}
	if len(refs) == 0 {
		delete(w.interest, release)
	} else {
		w.interest[release] = refs
	}
	for _, r := range refs {
		m := w.counts[r.GVR]
		if m == nil {
			m = map[string]int{}
			w.counts[r.GVR] = m
		}
		m[r.Namespace]++
	}
	w.reconcileLocked()
}

// desiredLocked returns the informers that the counts ask for.
func (w *targetWatches) desiredLocked() map[scopeKey]bool {
	want := map[scopeKey]bool{}
	now := w.opts.Clock.Now()
	for gvr, nss := range w.counts {
		if fb, ok := w.fallback[gvr]; ok && now.Before(fb.until) {
			continue
		}
		// Hysteresis: a type goes all-namespaces above the threshold and back to
		// per-namespace informers only at half of it, so it does not flap.
		n := len(nss)
		wide := n > w.opts.NamespaceThreshold || (w.wide[gvr] && n > w.opts.NamespaceThreshold/2)
		_, clusterScoped := nss[""]
		if wide || clusterScoped {
			want[scopeKey{gvr: gvr}] = true
			w.wide[gvr] = wide
			continue
		}
		delete(w.wide, gvr)
		for ns := range nss {
			want[scopeKey{gvr: gvr, namespace: ns}] = true
		}
	}
	return want
}

func (w *targetWatches) reconcileLocked() {
	want := w.desiredLocked()
	for k, s := range w.informers {
		if !want[k] {
			s.cancel()
			delete(w.informers, k)
			w.log.V(1).Info("stopped watching: nothing records it any more", "scope", k.String())
		}
	}
	for k := range want {
		if _, ok := w.informers[k]; !ok {
			w.informers[k] = w.startLocked(k)
			w.log.V(1).Info("started watching", "scope", k.String())
		}
	}
	for gvr := range w.wide {
		if _, ok := w.counts[gvr]; !ok {
			delete(w.wide, gvr)
		}
	}
	watchedScopes.WithLabelValues(w.cluster).Set(float64(len(w.informers)))
}

// startLocked starts the informer of k: objects go through compactForCache, list and
// watch errors are recorded (a forbidden or unserved type falls back to GETs).
func (w *targetWatches) startLocked(k scopeKey) *scopeInformer {
	ctx, cancel := context.WithCancel(w.ctx)
	s := &scopeInformer{key: k, cancel: cancel}
	s.touch()
	ri := w.client.Resource(k.gvr).Namespace(k.namespace)
	record := func(err error) {
		s.setErr(err)
		if err != nil && refusesWatch(err) {
			go w.fallBack(s, err)
		}
	}
	lw := recordingListWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ri.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return ri.Watch(ctx, o) }, record, s.touch)
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{},
		toolscache.SharedIndexInformerOptions{ObjectDescription: k.String()})
	_ = inf.SetTransform(compactForCache)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		record(err)
		w.log.V(1).Info("watch error", "scope", k.String(), "error", err.Error())
	})
	notify := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		a, err := meta.Accessor(obj)
		if err != nil || w.onObject == nil {
			return
		}
		w.onObject(ObjectEvent{Cluster: w.cluster, Group: k.gvr.Group, Kind: cachedKind(obj), Namespace: a.GetNamespace(), Name: a.GetName()})
	}
	_, _ = inf.AddEventHandler(changeHandler(notify))
	s.informer = inf
	go inf.RunWithContext(ctx)
	return s
}

// emptyWatchType is the type of watch.NewEmptyWatch, what client-go's Watch returns for
// a request that failed with a probable EOF or a timeout.
var emptyWatchType = reflect.TypeOf(watch.NewEmptyWatch())

// recordingListWatch is a ListWatch of list and watchFn that hands the outcome of
// every call to record (nil on success; a watch cut before it started is an error) and
// calls progress for each list that succeeded and each event of a watch (a first list
// that streams, as a watch with initial events, shows it is alive with every object).
func recordingListWatch(list toolscache.ListWithContextFunc, watchFn toolscache.WatchFuncWithContext, record func(error), progress func()) *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := list(ctx, o)
			record(err)
			if err == nil {
				progress()
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := watchFn(ctx, o)
			if err == nil && reflect.TypeOf(w) == emptyWatchType {
				// client-go answers a watch request whose connection was reset, cut
				// (EOF) or timed out with an empty watch and no error, so the informer
				// retries quietly; the cache must not be trusted meanwhile.
				record(fmt.Errorf("%w: the watch was cut before it started (connection reset, EOF or timeout)", ErrClusterNotConnected))
				return w, nil
			}
			record(err)
			if err != nil {
				return w, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) { progress(); return e, true }), nil
		},
	}
}

// changeHandler calls fn for an add after the informer's initial list, an update that
// changed the resourceVersion (not a relist that changed nothing) and a delete.
func changeHandler(fn func(obj any)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				fn(obj)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, err1 := meta.Accessor(old)
			c, err2 := meta.Accessor(cur)
			if err1 == nil && err2 == nil && o.GetResourceVersion() == c.GetResourceVersion() {
				return
			}
			fn(cur)
		},
		DeleteFunc: fn,
	}
}

// refusesWatch tells a list/watch that will not work for this type however often it is
// retried (forbidden, unserved, no list verb) from a transient failure.
func refusesWatch(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// fallBack stops the informer of s and reads its type with GETs until
// FallbackRetry passes (then the next Track tries to watch again).
func (w *targetWatches) fallBack(s *scopeInformer, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.informers[s.key]; !ok || cur != s {
		return
	}
	s.cancel()
	delete(w.informers, s.key)
	w.fallback[s.key.gvr] = fallbackState{until: w.opts.Clock.Now().Add(w.opts.FallbackRetry), err: err}
	watchFallbacks.WithLabelValues(w.cluster, s.key.gvr.GroupResource().String()).Inc()
	w.log.Info("cannot watch this type; reading it with GETs", "scope", s.key.String(),
		"retryAfter", w.opts.FallbackRetry.String(), "error", err.Error())
	watchedScopes.WithLabelValues(w.cluster).Set(float64(len(w.informers)))
}

// covering returns the informer that holds objects of gvr in namespace, preferring a
// per-namespace one; nil when none runs. fb is set when the type fell back to GETs.
func (w *targetWatches) covering(gvr schema.GroupVersionResource, namespace string) (s *scopeInformer, fb bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.informers[scopeKey{gvr: gvr, namespace: namespace}]; s != nil && namespace != "" {
		if s.informer.HasSynced() {
			return s, false
		}
		if all := w.informers[scopeKey{gvr: gvr}]; all != nil && all.informer.HasSynced() {
			return all, false
		}
		return s, false
	}
	if s := w.informers[scopeKey{gvr: gvr}]; s != nil {
		return s, false
	}
	fbs, ok := w.fallback[gvr]
	return nil, ok && w.opts.Clock.Now().Before(fbs.until)
}

// Get implements ObjectReader from the cache: a synced informer answers; a type that is
// not watched, refused or failing, or an informer that has not synced within SyncWait,
// is read with a GET. A cache that has not synced never answers "not found", and a miss
// in a synced cache is confirmed with a GET (the watch may lag the inventory).
func (w *targetWatches) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if err := w.direct.heldDown(); err != nil {
		return nil, err
	}
	s, fb := w.covering(gvr, namespace)
	switch {
	case s == nil && fb:
		return w.get(ctx, sourceFallback, gvr, namespace, name)
	case s == nil:
		return w.get(ctx, sourceUnwatched, gvr, namespace, name)
	}
	if !s.informer.HasSynced() {
		if s.err() != nil {
			return w.get(ctx, sourceWatchFailed, gvr, namespace, name)
		}
		if w.waitSynced(ctx, s) != nil {
			return w.get(ctx, sourceNotSynced, gvr, namespace, name)
		}
	}
	if err := s.err(); err != nil {
		// The watch is broken (a connection error, an error status, a watch cut at
		// once): the cache may be stale, so ask the server (which holds the cluster
		// down when it does not answer).
		return w.get(ctx, sourceWatchFailed, gvr, namespace, name)
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := s.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s from the cache: %w", gvr.GroupResource(), key, err)
	}
	if !ok {
		return w.get(ctx, sourceMiss, gvr, namespace, name)
	}
	targetReads.WithLabelValues(w.cluster, sourceCache).Inc()
	return cachedUnstructured(obj)
}

func (w *targetWatches) get(ctx context.Context, source string, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	targetReads.WithLabelValues(w.cluster, source).Inc()
	return w.direct.Get(ctx, gvr, namespace, name)
}

// syncWaitLimit bounds, in SyncWaits, how long a read waits for a first list that
// keeps streaming.
const syncWaitLimit = 12

// waitSynced waits for s to sync while its first list makes progress, so that reads
// wait for a big list instead of each sending a GET. It gives up when the list fails,
// when nothing arrived for SyncWait (a cluster that stopped answering), and after
// syncWaitLimit SyncWaits. It returns nil once synced, else why it gave up: the list's
// error, errStalled, or the poll's timeout.
func (w *targetWatches) waitSynced(ctx context.Context, s *scopeInformer) error {
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, syncWaitLimit*w.opts.SyncWait, true, func(context.Context) (bool, error) {
		if s.informer.HasSynced() {
			return true, nil
		}
		if err := s.err(); err != nil {
			return false, err
		}
		if s.stalled(w.opts.SyncWait) {
			return false, errStalled
		}
		return false, nil
	})
	return err
}

var errStalled = errors.New("the first list delivered nothing for a while")

// scopes returns the running informers' scopes, sorted, for tests and logs.
func (w *targetWatches) scopes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sortedNames(w.informers)
}

// sortedNames returns the keys of m as strings, sorted.
func sortedNames[K interface {
	comparable
	fmt.Stringer
}, V any](m map[K]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

// lastAppliedAnnotation is kubectl's copy of the last applied object; rules never see it
// (health.Evaluator removes it on every path) and it doubles an object's size.
const lastAppliedAnnotation = health.LastAppliedAnnotation

// stripForCache drops from an object what rules never read before it is cached:
// metadata.managedFields and the last-applied-configuration annotation.
func stripForCache(obj any) (any, error) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t, nil
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	a.SetManagedFields(nil)
	if ann := a.GetAnnotations(); ann != nil {
		if _, ok := ann[lastAppliedAnnotation]; ok {
			delete(ann, lastAppliedAnnotation)
			if len(ann) == 0 {
				ann = nil
			}
			a.SetAnnotations(ann)
		}
	}
	return obj, nil
}
