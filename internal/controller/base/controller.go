package base

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Per-item retry backoff after a transient error: 5ms, 10ms, 20ms, ... doubling up to
// 1000s (the 18th failure waits 10m55.36s, later ones 16m40s; client-go saturates, so
// the delay never overflows to 0). Forget resets it to 5ms.
const (
	retryBaseDelay = 5 * time.Millisecond
	retryMaxDelay  = 1000 * time.Second
)

// NewRateLimiter returns the per-item retry limiter of one queue. Every queue gets its
// own instance: a limiter shared by two queues lets a success in one reset the backoff
// of the other (shared/cases 26). There is no token bucket: periodic re-checks use
// AddAfter and retries are per item, so a bucket would only stretch them (cases 25).
func NewRateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBaseDelay, retryMaxDelay)
}

// Result is what a sync function asks of the queue beyond success or failure.
type Result struct {
	// RequeueAfter > 0 schedules the next pass of the key after this delay; the key's
	// failure count is cleared first (shared/cases 24).
	RequeueAfter time.Duration
}

// SyncFunc does one pass for one key (namespace/name). A non-nil error is transient:
// the key is retried with the rate limiter. Wrap an error with Terminal to log it and
// drop the key instead.
type SyncFunc func(ctx context.Context, key string) (Result, error)

type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Terminal marks err as not worth a retry.
func Terminal(err error) error { return terminalError{err} }

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

// Controller runs workers over a rate-limited work queue of keys. It implements
// manager.Runnable and needs leader election.
type Controller struct {
	// Name names the controller in logs and in the queue's metrics.
	Name string
	// Workers is the number of concurrent workers; a key is never synced by two at once.
	Workers int
	// SyncHandler is the pass; a field so tests can replace or wrap it.
	SyncHandler SyncFunc
	// HasSynced reports whether the caches the pass reads from are ready; nil means ready.
	HasSynced []func() bool
	// Log is the controller's logger.
	Log logr.Logger

	Queue workqueue.TypedRateLimitingInterface[string]

	startOnce sync.Once
}

// NewController returns a controller with its own queue and rate limiter.
func NewController(name string, workers int, sync SyncFunc) *Controller {
	if workers < 1 {
		workers = 1
	}
	return &Controller{
		Name:        name,
		Workers:     workers,
		SyncHandler: sync,
		Log:         ctrl.Log.WithName(name),
		Queue: workqueue.NewTypedRateLimitingQueueWithConfig(NewRateLimiter(),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name}),
	}
}

// Enqueue adds key now.
func (c *Controller) Enqueue(key string) { c.Queue.Add(key) }

// NeedLeaderElection makes the manager run the loop on the elected leader only.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start waits for the caches, runs the workers until ctx ends, then shuts the queue
// down and waits for the workers to finish their current pass.
func (c *Controller) Start(ctx context.Context) error {
	started := false
	c.startOnce.Do(func() { started = true })
	if !started {
		return fmt.Errorf("controller %s already started", c.Name)
	}
	defer utilruntime.HandleCrash()
	c.Log.Info("starting", "workers", c.Workers)
	for _, synced := range c.HasSynced {
		if !waitFor(ctx, synced) {
			c.Queue.ShutDown()
			return fmt.Errorf("controller %s: caches did not sync: %w", c.Name, ctx.Err())
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < c.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, c.runWorker, time.Second)
		}()
	}
	<-ctx.Done()
	c.Queue.ShutDown()
	wg.Wait()
	c.Log.Info("stopped")
	return nil
}

func waitFor(ctx context.Context, cond func() bool) bool {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	return err == nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.ProcessNextWorkItem(ctx) {
	}
}

// ProcessNextWorkItem takes one key, syncs it and handles the outcome. It returns
// false when the queue is shut down. Tests call it to drive exactly one pass.
func (c *Controller) ProcessNextWorkItem(ctx context.Context) bool {
	key, quit := c.Queue.Get()
	if quit {
		return false
	}
	defer c.Queue.Done(key)
	res, err := c.safeSync(ctx, key)
	c.handleErr(key, res, err)
	return true
}

// safeSync turns a panic in one pass into an error, so one odd object never kills the
// worker.
func (c *Controller) safeSync(ctx context.Context, key string) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in sync of %s: %v", key, r)
		}
	}()
	return c.SyncHandler(ctx, key)
}

func (c *Controller) handleErr(key string, res Result, err error) {
	log := c.Log.WithValues("release", key)
	switch {
	case err == nil && res.RequeueAfter > 0:
		c.Queue.Forget(key)
		c.Queue.AddAfter(key, res.RequeueAfter)
	case err == nil:
		c.Queue.Forget(key)
	case isTerminal(err):
		log.Error(err, "dropping key after a terminal error")
		c.Queue.Forget(key)
	case IsQuiet(err):
		log.V(1).Info("pass requeued", "reason", err.Error(), "retries", c.Queue.NumRequeues(key))
		c.Queue.AddRateLimited(key)
	default:
		log.Error(err, "pass failed, retrying", "retries", c.Queue.NumRequeues(key))
		c.Queue.AddRateLimited(key)
	}
}

func isTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}
