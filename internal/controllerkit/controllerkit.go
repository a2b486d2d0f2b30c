package controllerkit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Per-item retry backoff after a transient error: 5ms, 10ms, 20ms, ... doubling up to
// 32s (the 14th failure waits 40.96s capped to 32s, and every later one 32s; client-go
// saturates, so the delay never overflows to 0). 32s is the health loop's longest
// re-check delay: a failed write is never retried later than a re-check would have come
// (docs/design.md, "Retries"). Forget (a success, or a scheduled re-check) resets it to
// 5ms.
const (
	retryBaseDelay = 5 * time.Millisecond
	// RetryMaxDelay is the longest delay of a retry.
	RetryMaxDelay = 32 * time.Second
)

// NewRateLimiter returns the per-item retry limiter of one controller's queue. Every
// controller gets its own instance: a limiter shared by two queues lets a success in one
// reset the backoff of the other. There is no token bucket (unlike
// controller-runtime's default): periodic re-checks use RequeueAfter and retries are per
// item, so a bucket would only stretch them (docs/design.md, "Retries").
func NewRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBaseDelay, RetryMaxDelay)
}

// WithMaxDelay caps the delays of rl per item: maxDelay(item) > 0 is the item's longest
// delay (a Release's syncPolicy.interval, say); 0 keeps rl's. maxDelay must not block: the
// queue calls it for every retry.
func WithMaxDelay(rl workqueue.TypedRateLimiter[reconcile.Request], maxDelay func(reconcile.Request) time.Duration) workqueue.TypedRateLimiter[reconcile.Request] {
	return cappedLimiter{TypedRateLimiter: rl, maxDelay: maxDelay}
}

type cappedLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	maxDelay func(reconcile.Request) time.Duration
}

func (c cappedLimiter) When(item reconcile.Request) time.Duration {
	d := c.TypedRateLimiter.When(item)
	if m := c.maxDelay(item); m > 0 && d > m {
		return m
	}
	return d
}

// ControllerOptions returns the options of a loop's controller-runtime controller:
// workers concurrent passes (at least 1; a key is never synced by two at once), its own
// NewRateLimiter, panics recovered into a rate-limited retry, and leader election (only
// the elected replica of a shard set runs passes). EnableWarmup starts the watches on
// standby replicas too, so a new leader starts with synced caches.
func ControllerOptions(workers int) controller.Options {
	yes := true
	return controller.Options{
		MaxConcurrentReconciles: max(workers, 1),
		RateLimiter:             NewRateLimiter(),
		RecoverPanic:            &yes,
		NeedLeaderElection:      &yes,
		EnableWarmup:            &yes,
	}
}

// Result is what a sync function asks of the queue beyond success or failure.
type Result struct {
	// RequeueAfter > 0 schedules the next pass of the key after this delay; the key's
	// failure count is cleared first, so a later error retries from the base delay.
	RequeueAfter time.Duration
}

// SyncFunc does one pass for one key (namespace/name). A non-nil error is transient:
// the key is retried with the rate limiter and the error logged. Wrap an error with
// reconcile.TerminalError to log it and not retry, or with Quiet to retry it without an
// error-level line.
type SyncFunc func(ctx context.Context, key string) (Result, error)

type quietError struct{ err error }

func (e quietError) Error() string { return e.err.Error() }
func (e quietError) Unwrap() error { return e.err }

// Quiet marks err as expected: the key is retried with the rate limiter like after any
// transient error, but the failure is logged at V(1) instead of error level. For a
// write that lost a precondition race (a lagging cache, a concurrent writer) and for a
// pass cut off by shutdown.
func Quiet(err error) error { return quietError{err} }

// IsQuiet reports whether err was marked with Quiet.
func IsQuiet(err error) bool {
	var q quietError
	return errors.As(err, &q)
}

// Reconciler runs a SyncFunc as a controller-runtime reconciler; the controller's queue
// then does what a worker must: Forget on success, a rate-limited retry on a
// transient error (logged at error level by controller-runtime), none on a
// reconcile.TerminalError, Forget-then-AddAfter for Result.RequeueAfter.
// A Quiet error becomes a rate-limited requeue without an error, logged at V(1).
type Reconciler struct {
	// Sync is the pass; a field so tests can replace or wrap it.
	Sync SyncFunc
}

// Reconcile does one pass for req, keyed namespace/name (name alone without a namespace).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := toolscache.ObjectName{Namespace: req.Namespace, Name: req.Name}.String()
	res, err := r.Sync(ctx, key)
	switch {
	case err != nil && IsQuiet(err):
		logf.FromContext(ctx).V(1).Info("pass requeued", "reason", err.Error())
		// Requeue is deprecated for reconcilers that wait for something; here it is the
		// one way to get a rate-limited retry without controller-runtime's error line.
		return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // see above
	case err != nil:
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: res.RequeueAfter}, nil
}

// Enqueuer adds keys to a controller's queue from outside its watches (changes of
// target objects, a rebuilt cluster). Source is its controller-runtime source; until the
// controller has started it, Enqueue drops keys (the controller's first list queues
// every Release anyway).
type Enqueuer struct {
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// Source returns the source to pass to the builder's WatchesRawSource.
func (e *Enqueuer) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.queue = q
		return nil
	})
}

// Enqueue adds key (namespace/name) now; it never blocks.
func (e *Enqueuer) Enqueue(key string) { e.Add(RequestOf(key)) }

// Add adds reqs now; it never blocks.
func (e *Enqueuer) Add(reqs ...reconcile.Request) {
	e.mu.Lock()
	q := e.queue
	e.mu.Unlock()
	if q == nil {
		return
	}
	for _, r := range reqs {
		q.Add(r)
	}
}

// RequestOf returns the request of the key namespace/name (or name).
func RequestOf(key string) reconcile.Request {
	if ns, name, ok := strings.Cut(key, "/"); ok {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: key}}
}
