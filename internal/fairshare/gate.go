package fairshare

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Fair evaluation (docs/operations.md, "Tenants and fairness").
//
// Rule evaluations are CPU work: a namespace whose rules are expensive (an admissible
// nested comprehension over a large ConfigMap, a heavy regex) must not slow the passes of
// another namespace. Every evaluation of the loop therefore goes through one Gate:
// at most slots evaluations run at once (GOMAXPROCS: what the cores can run; more would
// only share the cores among more goroutines), and when evaluations wait for a slot, the
// next one goes to the namespace that has used the least evaluation CPU, divided by its
// weight: start-time fair queuing with the namespaces as flows, the scheme of the API
// server's priority and fairness. A namespace that has been quiet starts at the current
// virtual time, so it neither owes for nor saves up its quiet time. Each grant charges
// the namespace an estimate (its recent mean CPU per evaluation), corrected by the CPU
// that the evaluation actually used when it ends (as the API server corrects a request's
// width by its duration), so two slots granted at once do not both go to the namespace
// that is about to be charged.
//
// Within a namespace, evaluations go in the order of their passes (then first come,
// first served): the earliest pass finishes first and frees its worker, instead of every
// pass of a busy namespace advancing together and all finishing last.

// minEstimate is the first estimate of a namespace's CPU per evaluation.
const minEstimate = 100 * time.Microsecond

// Gate bounds the evaluations in flight and serves waiting ones fairly across
// namespaces. The zero value is not usable: call NewGate.
type Gate struct {
	slots int

	mu      sync.Mutex
	busy    int
	waiting int
	// vnow is the virtual time: the start tag of the evaluation granted last.
	vnow  float64
	flows map[string]*flow
}

// flow is one namespace in the gate.
type flow struct {
	// vtime is the namespace's virtual finish time: the CPU seconds charged to it,
	// divided by its weight, lifted to vnow whenever it became active again.
	vtime float64
	// estimate is the exponentially weighted mean CPU seconds of its evaluations.
	estimate float64
	inflight int
	queue    []*waiter // sorted by (pass, arrival)
}

// waiter is an evaluation waiting for a slot.
type waiter struct {
	pass    uint64
	weight  float64
	granted chan struct{}
	// charged is the estimate charged at the grant, set under the gate's lock.
	charged float64
}

// NewGate returns a gate of slots evaluations at once; slots < 1 means GOMAXPROCS.
func NewGate(slots int) *Gate {
	if slots < 1 {
		slots = runtime.GOMAXPROCS(0)
	}
	return &Gate{slots: slots, flows: map[string]*flow{}}
}

// Ticket is a granted slot; release it with Done.
type Ticket struct {
	g         *Gate
	namespace string
	weight    float64
	charged   float64
	// Waited is how long the evaluation waited for its slot.
	Waited time.Duration
}

// Acquire waits for a slot for an evaluation of namespace (weight > 0) in the pass
// numbered pass (lower numbers are served first within the namespace). It returns
// ctx.Err() if ctx ends first.
func (g *Gate) Acquire(ctx context.Context, namespace string, weight float64, pass uint64) (Ticket, error) {
	if weight <= 0 {
		weight = 1
	}
	g.mu.Lock()
	f := g.flow(namespace)
	if g.busy < g.slots && g.waiting == 0 {
		charged := g.grantLocked(f, weight)
		g.mu.Unlock()
		return Ticket{g: g, namespace: namespace, weight: weight, charged: charged}, nil
	}
	w := &waiter{pass: pass, weight: weight, granted: make(chan struct{})}
	i := len(f.queue)
	for i > 0 && f.queue[i-1].pass > pass {
		i--
	}
	f.queue = append(f.queue, nil)
	copy(f.queue[i+1:], f.queue[i:])
	f.queue[i] = w
	g.waiting++
	g.mu.Unlock()

	start := time.Now()
	select {
	case <-w.granted:
		return Ticket{g: g, namespace: namespace, weight: weight, charged: w.charged, Waited: time.Since(start)}, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-w.granted:
		// Granted meanwhile: hand the slot on.
		g.mu.Unlock()
		Ticket{g: g, namespace: namespace, weight: weight, charged: w.charged}.Done(0)
		return Ticket{}, ctx.Err()
	default:
	}
	for i, q := range f.queue {
		if q == w {
			f.queue = append(f.queue[:i], f.queue[i+1:]...)
			g.waiting--
			break
		}
	}
	g.pruneLocked(namespace, f)
	g.mu.Unlock()
	return Ticket{}, ctx.Err()
}

// Done releases the slot of t and charges its namespace the evaluation's CPU time.
func (t Ticket) Done(cpu time.Duration) {
	g := t.g
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.flow(t.namespace)
	actual := cpu.Seconds()
	f.vtime += (actual - t.charged) / t.weight
	f.estimate = 0.8*f.estimate + 0.2*max(actual, minEstimate.Seconds())
	f.inflight--
	g.busy--
	g.dispatchLocked()
	g.pruneLocked(t.namespace, f)
}

// flow returns the flow of namespace, made on first use.
func (g *Gate) flow(namespace string) *flow {
	f, ok := g.flows[namespace]
	if !ok {
		f = &flow{vtime: g.vnow, estimate: minEstimate.Seconds()}
		g.flows[namespace] = f
	}
	return f
}

// grantLocked takes a slot for f: its start tag is its virtual time lifted to vnow, and
// it is charged its estimate. It returns the charge.
func (g *Gate) grantLocked(f *flow, weight float64) float64 {
	start := max(f.vtime, g.vnow)
	g.vnow = start
	f.vtime = start + f.estimate/weight
	f.inflight++
	g.busy++
	return f.estimate
}

// dispatchLocked grants free slots to the waiting evaluations of the flows with the
// lowest start tags.
func (g *Gate) dispatchLocked() {
	for g.busy < g.slots && g.waiting > 0 {
		var best *flow
		bestTag := 0.0
		for _, f := range g.flows {
			if len(f.queue) == 0 {
				continue
			}
			tag := max(f.vtime, g.vnow)
			if best == nil || tag < bestTag || (tag == bestTag && f.inflight < best.inflight) {
				best, bestTag = f, tag
			}
		}
		w := best.queue[0]
		best.queue = best.queue[1:]
		g.waiting--
		w.charged = g.grantLocked(best, w.weight)
		close(w.granted)
	}
}

// pruneLocked forgets the flow of a namespace that has nothing waiting or running and no
// debt left (its virtual time is not ahead of vnow), so the map does not grow with every
// namespace ever seen.
func (g *Gate) pruneLocked(namespace string, f *flow) {
	if f.inflight == 0 && len(f.queue) == 0 && f.vtime <= g.vnow {
		delete(g.flows, namespace)
	}
}
