// Package kittest runs a loop's sync function inside a real controller-runtime
// controller built from controllerkit.ControllerOptions (its queue, its rate limiter, its panic
// recovery, controllerkit.Reconciler), one pass at a time, so tests see what the queue does with
// the outcome of a pass: a rate-limited retry, a scheduled re-check, or nothing.
//
//	loop := kittest.Start(t, h.syncHandler, log)
//	loop.Enqueue("demo/app1")
//	out := loop.Step(t)               // lets one pass run and waits until the queue handled it
//	n := loop.NumRequeues("demo/app1") // rate-limited retries asked since the last Forget
package kittest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kumodo/convoy-observer/internal/controllerkit"
)

// stepTimeout bounds each wait of Step: for a key to come back to the queue, and for a
// pass to end.
const stepTimeout = 10 * time.Second

// Outcome is what one pass returned to the controller.
type Outcome struct {
	Key      string
	Result   reconcile.Result
	Err      error
	Panicked bool
}

// Loop is a running controller whose passes wait for Step.
type Loop struct {
	limiter  workqueue.TypedRateLimiter[reconcile.Request]
	tokens   chan struct{}
	outcomes chan Outcome
	handled  chan struct{}

	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	adds    map[reconcile.Request][]priorityqueue.AddOpts
	retries map[reconcile.Request]int
}

// Start runs sync in a controller with one worker, controllerkit.ControllerOptions and log as the
// controller's logger, until the test ends.
func Start(t testing.TB, sync controllerkit.SyncFunc, log logr.Logger) *Loop {
	t.Helper()
	opts := controllerkit.ControllerOptions(1)
	l := &Loop{
		limiter:  opts.RateLimiter,
		tokens:   make(chan struct{}),
		outcomes: make(chan Outcome, 1),
		handled:  make(chan struct{}, 1),
		adds:     map[reconcile.Request][]priorityqueue.AddOpts{},
		retries:  map[reconcile.Request]int{},
	}
	skip := true
	opts.SkipNameValidation = &skip
	opts.Logger = log
	inner := &controllerkit.Reconciler{Sync: sync}
	opts.Reconciler = reconcile.Func(func(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
		select {
		case <-l.tokens:
		case <-ctx.Done():
			return reconcile.Result{}, nil // the test is over
		}
		panicked := true
		defer func() {
			l.outcomes <- Outcome{Key: keyOf(req), Result: res, Err: err, Panicked: panicked}
		}()
		res, err = inner.Reconcile(ctx, req)
		panicked = false
		return res, err
	})
	// The production queue (a priority queue with the controller's rate limiter),
	// wrapped to see what the controller adds and when it is done with a pass.
	opts.NewQueue = func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return &watchedQueue{PriorityQueue: priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) { o.RateLimiter = rl }), l: l}
	}
	c, err := controller.NewUnmanaged("loop-test", opts)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	if err := c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		l.mu.Lock()
		l.queue = q
		l.mu.Unlock()
		close(ready)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Start(ctx); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(stepTimeout):
		t.Fatal("the controller did not start its source")
	}
	return l
}

// Enqueue adds key (namespace/name) to the queue, as an event would.
func (l *Loop) Enqueue(key string) {
	l.mu.Lock()
	q := l.queue
	l.mu.Unlock()
	q.Add(controllerkit.RequestOf(key))
}

// Step lets the next pass run, waiting at most 10s for a key, and returns its outcome
// once the controller has handled it (requeued, forgotten or dropped the key).
func (l *Loop) Step(t testing.TB) Outcome {
	t.Helper()
	select {
	case l.tokens <- struct{}{}:
	case <-time.After(stepTimeout):
		t.Fatal("no key came back to the queue")
	}
	var out Outcome
	select {
	case out = <-l.outcomes:
	case <-time.After(stepTimeout):
		t.Fatal("the pass did not end")
	}
	select {
	case <-l.handled:
	case <-time.After(stepTimeout):
		t.Fatal("the controller did not finish the pass")
	}
	return out
}

// NumRequeues returns the rate-limited retries that the controller asked for key since
// it last forgot it. (The priority queue asks the rate limiter for the delay later, in
// its own goroutine, so the limiter's own count may lag behind.)
func (l *Loop) NumRequeues(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retries[controllerkit.RequestOf(key)]
}

// Limiter is the controller's rate limiter (to simulate earlier failures).
func (l *Loop) Limiter() workqueue.TypedRateLimiter[reconcile.Request] { return l.limiter }

// Adds returns what the controller and Enqueue added for key so far, in order.
func (l *Loop) Adds(key string) []priorityqueue.AddOpts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]priorityqueue.AddOpts(nil), l.adds[controllerkit.RequestOf(key)]...)
}

func keyOf(req reconcile.Request) string {
	return toolscache.ObjectName{Namespace: req.Namespace, Name: req.Name}.String()
}

// watchedQueue records adds, rate-limited retries and Forget, and reports the end of
// each pass (Done).
type watchedQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	l *Loop
}

func (q *watchedQueue) record(o priorityqueue.AddOpts, items ...reconcile.Request) {
	q.l.mu.Lock()
	defer q.l.mu.Unlock()
	for _, it := range items {
		q.l.adds[it] = append(q.l.adds[it], o)
		if o.RateLimited {
			q.l.retries[it]++
		}
	}
}

func (q *watchedQueue) Forget(item reconcile.Request) {
	q.l.mu.Lock()
	delete(q.l.retries, item)
	q.l.mu.Unlock()
	q.PriorityQueue.Forget(item)
}

func (q *watchedQueue) Add(item reconcile.Request) {
	q.record(priorityqueue.AddOpts{}, item)
	q.PriorityQueue.Add(item)
}

func (q *watchedQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.record(priorityqueue.AddOpts{After: d}, item)
	q.PriorityQueue.AddAfter(item, d)
}

func (q *watchedQueue) AddRateLimited(item reconcile.Request) {
	q.record(priorityqueue.AddOpts{RateLimited: true}, item)
	q.PriorityQueue.AddRateLimited(item)
}

func (q *watchedQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	q.record(o, items...)
	q.PriorityQueue.AddWithOpts(o, items...)
}

func (q *watchedQueue) Done(item reconcile.Request) {
	q.PriorityQueue.Done(item)
	select {
	case q.l.handled <- struct{}{}:
	default:
	}
}
