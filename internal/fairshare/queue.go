package fairshare

import (
	"math"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QueueOptions configure NewQueue.
type QueueOptions struct {
	// Weight returns the weight of a namespace (a namespace of weight 2 gets two keys
	// served per round of the others' one); nil, or a value <= 0, means 1.
	Weight func(namespace string) float64
	// Waited, when not nil, is told how long each key waited from the moment it was
	// ready (added, or its delay passed) until a worker took it.
	Waited func(namespace string, wait time.Duration)
}

// NewQueue returns a controller.Options.NewQueue: controller-runtime's priority queue
// (pkg/controller/priorityqueue: de-duplicated keys, delayed and rate-limited adds, a
// key never handed to two workers) whose keys are served round-robin across namespaces.
//
// The priority queue serves higher priorities first and first come, first served within
// a priority. A key added while its namespace already has n keys queued gets the
// priority asked for (0, or controller-runtime's LowPriority for keys of the initial
// list) minus floor(n / weight): the first queued key of every namespace goes before the
// second of any, and so on. So a Release of a quiet namespace is not served after the
// thousands of keys that a busy namespace queued before it, but after at most one key
// (weight keys) of each namespace ahead of it. A key already queued keeps its place.
// GetWithPriority returns the priority asked for, so a requeue does not lower a key
// twice.
func NewQueue(o QueueOptions) func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return &fairQueue{
			PriorityQueue: priorityqueue.New(name, func(po *priorityqueue.Opts[reconcile.Request]) { po.RateLimiter = rl }),
			opts:          o,
			queued:        map[reconcile.Request]fairItem{},
			depth:         map[string]int{},
			now:           time.Now,
		}
	}
}

// fairQueue is NewFairQueue's queue.
type fairQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	opts QueueOptions
	now  func() time.Time

	mu     sync.Mutex
	queued map[reconcile.Request]fairItem // keys in the queue, not yet handed out
	depth  map[string]int                 // keys in the queue per namespace
}

// fairItem is what fairQueue knows of a queued key.
type fairItem struct {
	asked    int       // the priority asked for
	priority int       // the priority given to the priority queue
	readyAt  time.Time // when it is (or was) ready: added, plus its delay
	retry    bool      // last added as a rate-limited retry
}

// weight returns the weight of namespace, at least a tiny positive number.
func (q *fairQueue) weight(namespace string) float64 {
	if q.opts.Weight == nil {
		return 1
	}
	if w := q.opts.Weight(namespace); w > 0 {
		return w
	}
	return 1
}

// AddWithOpts adds items with priorities lowered by their namespaces' backlogs (see
// NewFairQueue).
func (q *fairQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	asked := 0
	if o.Priority != nil {
		asked = *o.Priority
	}
	now := q.now()
	for _, item := range items {
		readyAt := now.Add(o.After)
		q.mu.Lock()
		it, ok := q.queued[item]
		switch {
		case !ok:
			n := q.depth[item.Namespace]
			q.depth[item.Namespace] = n + 1
			lower := math.Floor(float64(n) / q.weight(item.Namespace))
			it = fairItem{asked: asked, priority: asked - int(min(lower, math.MaxInt32)), readyAt: readyAt}
		case asked > it.asked:
			// Asked again at a higher priority: raise it by as much, keeping its rank.
			it.priority += asked - it.asked
			it.asked = asked
		}
		if !ok || readyAt.Before(it.readyAt) {
			it.readyAt = readyAt
		}
		// A retry's delay is the rate limiter's, unknown here: its wait is not measured.
		it.retry = o.RateLimited
		q.queued[item] = it
		q.mu.Unlock()
		opts := o
		opts.Priority = &it.priority
		q.PriorityQueue.AddWithOpts(opts, item)
	}
}

// Add adds item now at priority 0.
func (q *fairQueue) Add(item reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, item) }

// AddAfter adds item after the delay.
func (q *fairQueue) AddAfter(item reconcile.Request, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

// AddRateLimited adds item after its rate limiter's delay.
func (q *fairQueue) AddRateLimited(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

// GetWithPriority hands out the next key with the priority that was asked for it.
func (q *fairQueue) GetWithPriority() (reconcile.Request, int, bool) {
	item, priority, shutdown := q.PriorityQueue.GetWithPriority()
	if shutdown {
		return item, priority, shutdown
	}
	q.mu.Lock()
	it, ok := q.queued[item]
	if ok {
		delete(q.queued, item)
		if n := q.depth[item.Namespace] - 1; n > 0 {
			q.depth[item.Namespace] = n
		} else {
			delete(q.depth, item.Namespace)
		}
		priority = it.asked
	} else {
		// Re-added while it was being handed out: its asked priority is lost, so it
		// counts as a normal key.
		priority = 0
	}
	q.mu.Unlock()
	if ok && !it.retry && q.opts.Waited != nil {
		q.opts.Waited(item.Namespace, max(q.now().Sub(it.readyAt), 0))
	}
	return item, priority, shutdown
}

// Get hands out the next key.
func (q *fairQueue) Get() (reconcile.Request, bool) {
	item, _, shutdown := q.GetWithPriority()
	return item, shutdown
}
