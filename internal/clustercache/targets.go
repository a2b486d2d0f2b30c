package clustercache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"sync"

	"github.com/kumodo/convoy-observer/health"
)

// Read sources of a target object, the values of the metric label "source".
const (
	sourceCache       = "cache"
	sourceUnwatched   = "unwatched"    // no informer names this type/namespace
	sourceFallback    = "fallback"     // list/watch forbidden or unserved: GETs
	sourceWatchFailed = "watch-failed" // the informer's last list/watch failed
	sourceNotSynced   = "not-synced"   // the informer did not sync within SyncWait
	sourceMiss        = "miss"         // not in the synced cache: confirmed with a GET
	sourceList        = "list"         // a LIST of a failing workload's Pods (ObjectLister)
)

// targetWatches runs the informers of one target cluster. What they cover comes from
// the cache's index (sync): per resource type, the namespaces that recorded objects
// live in, with a count. A type named in at most NamespaceThreshold namespaces gets one
// informer per namespace (memory bounded by what Releases record); more namespaces
// share one informer for all namespaces (watches bounded by the number of types).
type targetWatches struct {
	cluster  string
	client   dynamic.Interface // no client timeout: watches are long requests
	typed    *typedClients     // the protobuf clients of built-in types (nil: JSON only)
	direct   *dynamicReader    // GETs with the hold-down
	opts     *Options
	log      logr.Logger
	onObject func(ObjectKey)
	// fieldsFor returns the fields that an informer of the type keeps (nil: all), and
	// whether the rules' fields are known yet.
	fieldsFor func(schema.GroupVersionResource) (*health.Fields, bool)
	running   *goroutines
	ctx       context.Context
	cancelAll context.CancelFunc

	mu sync.Mutex
	// stopped: the cluster's clients were stopped (rebuilt or forgotten); nothing more
	// is started or counted, so a pass that still holds this reader does not bring
	// back the series of a forgotten cluster.
	stopped   bool
	informers map[scopeKey]*scopeInformer                   // running
	fallback  map[schema.GroupVersionResource]fallbackState // list/watch refused
	wide      map[schema.GroupVersionResource]bool          // currently all-namespaces
	// narrow holds the types whose list in all namespaces was forbidden (an identity
	// allowed in some namespaces only), watched namespace by namespace until then.
	narrow map[schema.GroupVersionResource]time.Time
	// unnarrowable holds the types refused in a namespace too while narrowed (the
	// identity may list them nowhere, or not in every namespace read): never narrowed
	// again, so each retry costs one refused list, as a plain fallback does.
	unnarrowable map[schema.GroupVersionResource]bool
	// resync: a type was narrowed, so the next Track syncs even if nothing it counts
	// changed (its per-namespace informers start then).
	resync bool
}

type fallbackState struct {
	until time.Time
	err   error
}

func newTargetWatches(ctx context.Context, running *goroutines, cluster string, client dynamic.Interface, direct *dynamicReader, opts *Options, onObject func(ObjectKey)) *targetWatches {
	ctx, cancel := context.WithCancel(ctx)
	return &targetWatches{
		cluster: cluster, client: client, direct: direct, opts: opts, onObject: onObject,
		log: opts.Log.WithValues("cluster", cluster), running: running, ctx: ctx, cancelAll: cancel,
		informers: map[scopeKey]*scopeInformer{},
		fallback:  map[schema.GroupVersionResource]fallbackState{},
		wide:      map[schema.GroupVersionResource]bool{},
		narrow:    map[schema.GroupVersionResource]time.Time{},

		unnarrowable: map[schema.GroupVersionResource]bool{},
	}
}

// stop stops every informer of the cluster.
func (w *targetWatches) stop() {
	w.cancelAll()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for k, s := range w.informers {
		s.cancel()
		delete(w.informers, k)
	}
	watchedScopes.DeletePartialMatch(map[string]string{"cluster": w.cluster})
}

// sync starts and stops informers so that they cover counts (gvr → namespace → refs,
// owned by the index: read only under the cache's lock, which the caller holds).
func (w *targetWatches) sync(counts map[schema.GroupVersionResource]map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	want := w.desiredLocked(counts)
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
	// A type that nothing records any more is forgotten in every map (a refused one
	// too): made-up resource names in a tenant's inventory must not grow them for the
	// clients' life.
	forgetUncounted(w.wide, counts)
	forgetUncounted(w.fallback, counts)
	forgetUncounted(w.narrow, counts)
	forgetUncounted(w.unnarrowable, counts)
	w.resync = false
	watchedScopes.WithLabelValues(w.cluster).Set(float64(len(w.informers)))
}

// forgetUncounted deletes from m every type that counts does not hold.
func forgetUncounted[V any](m map[schema.GroupVersionResource]V, counts map[schema.GroupVersionResource]map[string]int) {
	maps.DeleteFunc(m, func(gvr schema.GroupVersionResource, _ V) bool {
		_, ok := counts[gvr]
		return !ok
	})
}

// retryDue reports whether a sync would start or stop an informer although no count
// changed: a type was narrowed to per-namespace informers, or the FallbackRetry of a
// type that fell back to GETs (or was narrowed) has passed.
func (w *targetWatches) retryDue() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resync {
		return true
	}
	now := w.opts.Clock.Now()
	for _, fb := range w.fallback {
		if !now.Before(fb.until) {
			return true
		}
	}
	for _, until := range w.narrow {
		if !now.Before(until) {
			return true
		}
	}
	return false
}

// desiredLocked returns the informers that counts ask for.
func (w *targetWatches) desiredLocked(counts map[schema.GroupVersionResource]map[string]int) map[scopeKey]bool {
	want := map[scopeKey]bool{}
	now := w.opts.Clock.Now()
	for gvr, nss := range counts {
		narrowed := false
		if until, ok := w.narrow[gvr]; ok {
			if narrowed = now.Before(until); !narrowed {
				delete(w.narrow, gvr) // try all namespaces again
			}
		}
		if fb, ok := w.fallback[gvr]; ok {
			if now.Before(fb.until) {
				continue
			}
			delete(w.fallback, gvr) // watched again; a refusal falls back anew
		}
		// Hysteresis: a type goes all-namespaces above the threshold and back to
		// per-namespace informers only at half of it, so it does not flap.
		n := len(nss)
		wide := !narrowed && (n > w.opts.NamespaceThreshold || (w.wide[gvr] && n > w.opts.NamespaceThreshold/2))
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

// refield starts again every informer whose objects lack a field that the rules now
// read (Cache.SetRuleFields), and every informer started before the rules' fields were
// known (it keeps whole objects).
func (w *targetWatches) refield() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	for k, s := range w.informers {
		if want, _ := w.fields(k.gvr); !s.fieldsSet || !s.fields.Covers(want) {
			s.cancel()
			w.informers[k] = w.startLocked(k)
			w.log.V(1).Info("watching again: the fields the rules read changed", "scope", k.String(), "fields", want.String())
		}
	}
}

// fields returns the fields that an informer of gvr keeps (nil: all), and whether the
// rules' fields are known yet.
func (w *targetWatches) fields(gvr schema.GroupVersionResource) (*health.Fields, bool) {
	if w.fieldsFor == nil {
		return nil, false
	}
	return w.fieldsFor(gvr)
}

// startLocked starts the informer of k: objects go through compactForCache with the
// fields that the rules read of k's type, list and watch errors are recorded (a
// forbidden or unserved type falls back to GETs).
func (w *targetWatches) startLocked(k scopeKey) *scopeInformer {
	ctx, cancel := context.WithCancel(w.ctx)
	s := &scopeInformer{key: k, cancel: cancel, clock: w.opts.Clock}
	s.fields, s.fieldsSet = w.fields(k.gvr)
	s.touch()
	record := func(err error) {
		s.setErr(err)
		if err != nil && refusesWatch(err) {
			go w.fallBack(s, err)
		}
	}
	list, watchFn, example, gvk := w.listWatchOf(k)
	lw := recordingListWatch(list, watchFn, record, s.touch)
	notify := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		a, err := meta.Accessor(obj)
		if err != nil || w.onObject == nil {
			return
		}
		w.onObject(ObjectKey{Cluster: w.cluster, Group: k.gvr.Group, Kind: cachedKind(obj), Namespace: a.GetNamespace(), Name: a.GetName()})
	}
	s.informer = newInformer(lw, example, k.String(), func(err error) {
		record(err)
		w.log.V(1).Info("watch error", "scope", k.String(), "error", err.Error())
	}, notify)
	_ = s.informer.SetTransform(compactForCache(s.fields, gvk))
	w.running.goRun(ctx, s.informer.RunWithContext)
	w.running.goRun(ctx, func(ctx context.Context) { w.bound(ctx, s) })
	return s
}

// bound stops an informer whose first list has not ended after syncWaitLimit SyncWaits
// (the longest a read waits for it) and reads its type with GETs for FallbackRetry: a
// server that streams a first list without end would otherwise be read, and its objects
// held until the list's end, for as long as it streams.
func (w *targetWatches) bound(ctx context.Context, s *scopeInformer) {
	err := pollUntil(ctx, w.opts.Clock, syncWaitLimit*w.opts.SyncWait, func() (bool, error) { return s.informer.HasSynced(), nil })
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && !s.informer.HasSynced() {
		w.fallBack(s, fmt.Errorf("%w: the first list of %s did not end within %v", errListTooLong, s.key.String(), syncWaitLimit*w.opts.SyncWait))
	}
}

// errListTooLong is the cause of a fallback to GETs of a type whose first list did not
// end in time.
var errListTooLong = errors.New("first list too long")

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
	if s.key.namespace == "" && w.wide[s.key.gvr] && apierrors.IsForbidden(err) && !w.unnarrowable[s.key.gvr] {
		// Forbidden in all namespaces is not forbidden in each: the identity may read
		// the namespaces its Releases record (RoleBindings there), so the type is
		// watched namespace by namespace, not read with GETs.
		delete(w.wide, s.key.gvr)
		w.narrow[s.key.gvr] = w.opts.Clock.Now().Add(w.opts.FallbackRetry)
		w.resync = true
		w.log.Info("cannot watch this type in all namespaces; watching it namespace by namespace", "scope", s.key.String(),
			"resource", s.key.gvr.GroupResource().String(), "retryAfter", w.opts.FallbackRetry.String(), "error", err.Error())
		watchedScopes.WithLabelValues(w.cluster).Set(float64(len(w.informers)))
		return
	}
	if _, narrowed := w.narrow[s.key.gvr]; narrowed {
		delete(w.narrow, s.key.gvr)
		w.unnarrowable[s.key.gvr] = true
	}
	w.fallback[s.key.gvr] = fallbackState{until: w.opts.Clock.Now().Add(w.opts.FallbackRetry), err: err}
	// The type's other informers (its other namespaces) stop with it, now rather than
	// at the next Track that changes what is read; one refusal is counted once.
	for k, o := range w.informers {
		if k.gvr == s.key.gvr {
			o.cancel()
			delete(w.informers, k)
		}
	}
	watchFallbacks.WithLabelValues(w.cluster).Inc()
	w.log.Info("cannot watch this type; reading it with GETs", "scope", s.key.String(), "resource", s.key.gvr.GroupResource().String(),
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
		switch err := w.waitSynced(ctx, s); {
		case err == nil:
		case errors.Is(err, ErrClusterNotConnected): // the server did not answer: held down
			return nil, err
		case ctx.Err() != nil: // our caller gave up: no verdict, as notAnswered
			return nil, fmt.Errorf("%w: Cluster %s: %w", ErrClusterNotConnected, w.cluster, ctx.Err())
		default:
			return w.get(ctx, sourceNotSynced, gvr, namespace, name)
		}
	}
	if err := s.err(); err != nil {
		// The watch is broken (a connection error, an error status, a watch cut at
		// once): the cache may be stale, so ask the server (which holds the cluster
		// down when it does not answer).
		return w.get(ctx, sourceWatchFailed, gvr, namespace, name)
	}
	obj, ok, err := s.informer.GetIndexer().GetByKey(storeKey(namespace, name))
	if err != nil {
		return nil, fmt.Errorf("reading %s %s from the cache: %w", gvr.GroupResource(), storeKey(namespace, name), err)
	}
	if !ok {
		return w.get(ctx, sourceMiss, gvr, namespace, name)
	}
	w.countRead(sourceCache)
	return cachedUnstructured(obj)
}

// GetCached implements CachedReader: the object when a synced informer whose watch has
// not failed holds it and the cluster is not held down, as Get answers it from the
// cache; otherwise false, and nothing is counted.
func (w *targetWatches) GetCached(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, bool) {
	if w.direct.heldDown() != nil {
		return nil, false
	}
	s, _ := w.covering(gvr, namespace)
	if s == nil || !s.informer.HasSynced() || s.err() != nil {
		return nil, false
	}
	obj, ok, err := s.informer.GetIndexer().GetByKey(storeKey(namespace, name))
	if err != nil || !ok {
		return nil, false
	}
	u, err := cachedUnstructured(obj)
	if err != nil {
		return nil, false // Get says why
	}
	w.countRead(sourceCache)
	return u, true
}

// storeKey is the informers' store key of the object namespace/name (name alone for a
// cluster-scoped object), as cache.MetaNamespaceKeyFunc makes it.
func storeKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// List implements ObjectLister with the cluster's GET client (a LIST, never an
// informer), counted as a read of source "list".
func (w *targetWatches) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error) {
	w.countRead(sourceList)
	return w.direct.List(ctx, gvr, namespace, selector)
}

func (w *targetWatches) get(ctx context.Context, source string, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	w.countRead(source)
	return w.direct.Get(ctx, gvr, namespace, name)
}

// countRead counts a read from source, unless the cluster's clients were stopped.
func (w *targetWatches) countRead(source string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		targetReads.WithLabelValues(w.cluster, source).Inc()
	}
}

// syncWaitLimit bounds, in SyncWaits, how long a read waits for a first list that
// keeps streaming; silentLimit how long it waits for one that delivers nothing, even
// while the server answers /version (a list that hangs on a server that answers must
// not hold a worker for syncWaitLimit).
const (
	syncWaitLimit = 12
	silentLimit   = 3
)

// waitSynced waits for s to sync, so that reads wait for a first list instead of each
// sending a GET (a GET per read would add to the load of a server that is slow to
// list). While the list delivers objects it waits. Once it delivered nothing for
// SyncWait, it asks whether the server answers at all (dynamicReader.answers: one
// /version probe per SyncWait, shared by every read of the cluster): a server that
// answers is busy, not dead, and the read waits on, until the list has been silent for
// silentLimit SyncWaits; one that does not answer is held down. It gives up when the
// list fails and after syncWaitLimit SyncWaits, all on the cache's clock. It returns nil
// once synced, else why it gave up: the list's error, the hold-down (wrapping
// ErrClusterNotConnected), errStalled (silent for too long, or no probe to ask), or the
// wait's timeout.
func (w *targetWatches) waitSynced(ctx context.Context, s *scopeInformer) error {
	return pollUntil(ctx, w.opts.Clock, syncWaitLimit*w.opts.SyncWait, func() (bool, error) {
		if s.informer.HasSynced() {
			return true, nil
		}
		if err := s.err(); err != nil {
			return false, err
		}
		if !s.stalled(w.opts.SyncWait) {
			return false, nil
		}
		if w.direct == nil || s.stalled(silentLimit*w.opts.SyncWait) {
			return false, errStalled
		}
		if err := w.direct.heldDown(); err != nil {
			return false, err
		}
		switch err := w.direct.answers(ctx); {
		case err == nil:
			return false, nil // busy, not dead: wait on
		case errors.Is(err, errNoProbe):
			return false, errStalled
		case ctx.Err() != nil:
			return false, ctx.Err() // no verdict on the server
		default:
			return false, w.direct.hold(err)
		}
	})
}

// scopes returns the running informers' scopes, sorted, for tests and logs.
func (w *targetWatches) scopes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sortedNames(w.informers)
}
