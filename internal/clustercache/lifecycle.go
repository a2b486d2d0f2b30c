package clustercache

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
)

// Start runs the cache until ctx is cancelled, then stops it (Stop) and returns nil: it
// is the cache's manager.Runnable, added with mgr.Add so that the manager's shutdown
// ends every informer and Secret watch. Clients are built on demand, before Start too.
func (c *Cache) Start(ctx context.Context) error {
	<-ctx.Done()
	c.Stop()
	return nil
}

// NeedLeaderElection tells the manager to run the cache on every replica, not only on
// the leader: a replica that is not leading builds no clients, and one that loses the
// lease stops its loop before the cache.
func (c *Cache) NeedLeaderElection() bool { return false }

// Stop ends every informer and Secret watch and waits for their goroutines to return.
// Afterwards GetReader fails with ErrClusterNotConnected and readers handed out before
// read with GETs. Stop may be called more than once.
func (c *Cache) Stop() {
	c.mu.Lock()
	c.stopped = true
	clients := c.clients
	c.clients = map[string]*cachedClient{}
	c.mu.Unlock()
	c.cancel()
	for key, cc := range clients {
		cc.stop()
		forgetClusterMetrics(key)
	}
	if c.secrets != nil {
		c.secrets.stop()
	}
	c.running.stopAndWait()
}

func (c *Cache) stoppedErr(cluster string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		return nil
	}
	return c.stoppedErrLocked(cluster)
}

func (c *Cache) stoppedErrLocked(cluster string) error {
	return fmt.Errorf("%w: Cluster %s: the cluster cache was stopped", ErrClusterNotConnected, cluster)
}

// goroutines runs the cache's informers and waits for them at Stop; once stopped it
// starts none. Each goroutine, and every goroutine it starts, carries the profiler
// label "clustercache" with the cache's number, so a goroutine profile tells whose
// informers are left.
type goroutines struct {
	id     string // the value of the label
	labels pprof.LabelSet

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

var cacheNumbers atomic.Int64

func newGoroutines() *goroutines {
	id := strconv.FormatInt(cacheNumbers.Add(1), 10)
	return &goroutines{id: id, labels: pprof.Labels("clustercache", id)}
}

// goRun runs fn(ctx) in a goroutine unless the group was stopped. It reports whether it did.
func (g *goroutines) goRun(ctx context.Context, fn func(context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		pprof.Do(ctx, g.labels, fn)
	}()
	return true
}

func (g *goroutines) stopAndWait() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.wg.Wait()
}
