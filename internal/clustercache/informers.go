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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kumodo/convoy-observer/health"
)

// What the informers of targets and of kubeconfig Secrets share: the record of their
// last list/watch outcome, the change handler, and the waits on the cache's clock.

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
	clock    clock.PassiveClock
	// fields are the fields its objects keep (nil: all), fixed at its start; fieldsSet
	// says whether the rules' fields were known then (Cache.SetRuleFields had been
	// called), so that an informer started before keeps whole objects only until they are.
	fields    *health.Fields
	fieldsSet bool

	mu      sync.Mutex
	lastErr error // the last list/watch error, cleared by the next success
	// progress is when the informer was started or its list or watch last delivered
	// something (unix nanoseconds, on clock): a first list that streams is alive.
	progress atomic.Int64
}

func (s *scopeInformer) touch() { s.progress.Store(s.clock.Now().UnixNano()) }

// stalled reports whether nothing arrived for longer than d.
func (s *scopeInformer) stalled(d time.Duration) bool {
	return s.clock.Since(time.Unix(0, s.progress.Load())) > d
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

// pollEvery is how often a read that waits for an informer looks at it again.
const pollEvery = 10 * time.Millisecond

// pollUntil calls cond at once and then every pollEvery of clk until it returns true or
// an error, limit passes on clk, or ctx ends. It returns nil when cond returned true,
// else cond's error, context.DeadlineExceeded or ctx's error.
func pollUntil(ctx context.Context, clk clock.Clock, limit time.Duration, cond func() (bool, error)) error {
	deadline := clk.Now().Add(limit)
	for {
		if ok, err := cond(); ok || err != nil {
			return err
		}
		if !clk.Now().Before(deadline) {
			return context.DeadlineExceeded
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(pollEvery):
		}
	}
}

// emptyWatchType is the type of watch.NewEmptyWatch, what client-go's Watch returns for
// a request that failed with a probable EOF or a timeout.
var emptyWatchType = reflect.TypeOf(watch.NewEmptyWatch())

// recordingListWatch is a ListWatch of list and watchFn that hands the outcome of
// every call to record (nil on success; a watch cut before it started is an error) and
// calls progress for each list that succeeded and each event of a watch.
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
			return newProgressWatch(w, progress), nil
		},
	}
}

// progressWatch passes the events of a watch on, calling progress for each. Unlike
// watch.Filter, its goroutine ends at Stop even when nobody reads the event it holds
// (a stopped informer reads nothing more).
type progressWatch struct {
	in       watch.Interface
	out      chan watch.Event
	done     chan struct{}
	stop     sync.Once
	progress func()
}

func newProgressWatch(in watch.Interface, progress func()) *progressWatch {
	w := &progressWatch{in: in, out: make(chan watch.Event), done: make(chan struct{}), progress: progress}
	go w.loop()
	return w
}

func (w *progressWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *progressWatch) Stop() {
	w.stop.Do(func() {
		close(w.done)
		w.in.Stop()
	})
}

func (w *progressWatch) loop() {
	defer close(w.out)
	for {
		select {
		case <-w.done:
			return
		case e, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			w.progress()
			select {
			case w.out <- e:
			case <-w.done:
				return
			}
		}
	}
}

// newInformer returns an informer of lw that hands its list and watch errors to
// watchErr and calls changed for each change (changeHandler); description names it in
// client-go's logs. Its first list is a plain list, not a streamed one (listThenWatch).
func newInformer(lw *toolscache.ListWatch, example runtime.Object, description string, watchErr func(error), changed func(obj any)) toolscache.SharedIndexInformer {
	inf := toolscache.NewSharedIndexInformerWithOptions(listThenWatch{lw}, example,
		toolscache.SharedIndexInformerOptions{ObjectDescription: description})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) { watchErr(err) })
	_, _ = inf.AddEventHandler(changeHandler(changed))
	return inf
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

var errStalled = errors.New("the first list delivered nothing for a while")

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

// listThenWatch is lw with client-go's streamed first list (the WatchListClient feature:
// a watch with sendInitialEvents) turned off, so an informer starts as informers did
// before it: a list with resourceVersion "0", which the API server answers from its watch
// cache at once, then a watch from the list's resourceVersion. A streamed first list
// waits until the watch cache is as fresh as etcd, and on a busy API server that wait is
// the informer's whole start: at 10,000 Releases (100 namespaces of 1,000 Deployments, one
// informer each, while the observer's writes kept the server busy) the streams sent
// nothing for 10–13 s, and the first 40 s of a cold converge wrote 77 Healthy
// conditions; with a plain list, about 1,500 (docs/operations.md, "Against the floor").
// The watch cache may answer a list a moment older than etcd, as it answers any watch; the
// watch that follows brings every later change, and a read of what the cache misses
// is a GET, as always. A re-list lists from the last resourceVersion seen, or, when that
// has expired, reads etcd.
type listThenWatch struct{ *toolscache.ListWatch }

// IsWatchListSemanticsUnSupported tells client-go's reflector not to stream the first
// list (k8s.io/client-go/util/watchlist).
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// NewListThenWatchInformer is toolscache.NewSharedIndexInformer with the first list a
// plain list (listThenWatch), in the shape of controller-runtime's
// cache.Options.NewInformer: the observer's management cache starts its informers as
// the target informers start. An API server whose watch cache of a type is not ready
// (a custom resource that nobody has read since the server started or the CRD was
// installed: HealthRuleSets, at most sites) answers a streamed first list "429,
// Retry-After: 1", and a plain list from etcd; the health controller starts no pass
// until every informer of its sources has synced, so that second was the whole start's
// at 1,000 Releases in the benchmark. A ListerWatcher that is not a *toolscache.ListWatch
// is used as it is.
func NewListThenWatchInformer(lw toolscache.ListerWatcher, example runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if l, ok := lw.(*toolscache.ListWatch); ok {
		lw = listThenWatch{l}
	}
	return toolscache.NewSharedIndexInformer(lw, example, resync, indexers)
}
