package healthloop

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/celbound"
)

// Fair evaluation (docs/operations.md, "Tenants and fairness").
//
// Rule evaluations are CPU work: a namespace whose rules are expensive (an admissible
// nested comprehension over a large ConfigMap, a heavy regex) must not slow the passes of
// another namespace. Every evaluation of the loop therefore goes through one evalGate:
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

// evalGate bounds the evaluations in flight and serves waiting ones fairly across
// namespaces. The zero value is not usable: call newEvalGate.
type evalGate struct {
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
	queue    []*evalWaiter // sorted by (pass, arrival)
}

// evalWaiter is an evaluation waiting for a slot.
type evalWaiter struct {
	pass    uint64
	weight  float64
	granted chan struct{}
	// charged is the estimate charged at the grant, set under the gate's lock.
	charged float64
}

// newEvalGate returns a gate of slots evaluations at once; slots < 1 means GOMAXPROCS.
func newEvalGate(slots int) *evalGate {
	if slots < 1 {
		slots = runtime.GOMAXPROCS(0)
	}
	return &evalGate{slots: slots, flows: map[string]*flow{}}
}

// evalTicket is a granted slot; release it with done.
type evalTicket struct {
	g         *evalGate
	namespace string
	weight    float64
	charged   float64
	// waited is how long the evaluation waited for its slot.
	waited time.Duration
}

// acquire waits for a slot for an evaluation of namespace (weight > 0) in the pass
// numbered pass (lower numbers are served first within the namespace). It returns
// ctx.Err() if ctx ends first.
func (g *evalGate) acquire(ctx context.Context, namespace string, weight float64, pass uint64) (evalTicket, error) {
	if weight <= 0 {
		weight = 1
	}
	g.mu.Lock()
	f := g.flow(namespace)
	if g.busy < g.slots && g.waiting == 0 {
		charged := g.grantLocked(f, weight)
		g.mu.Unlock()
		return evalTicket{g: g, namespace: namespace, weight: weight, charged: charged}, nil
	}
	w := &evalWaiter{pass: pass, weight: weight, granted: make(chan struct{})}
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
		return evalTicket{g: g, namespace: namespace, weight: weight, charged: w.charged, waited: time.Since(start)}, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-w.granted:
		// Granted meanwhile: hand the slot on.
		g.mu.Unlock()
		evalTicket{g: g, namespace: namespace, weight: weight, charged: w.charged}.done(0)
		return evalTicket{}, ctx.Err()
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
	return evalTicket{}, ctx.Err()
}

// done releases the slot of t and charges its namespace the evaluation's CPU time.
func (t evalTicket) done(cpu time.Duration) {
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
func (g *evalGate) flow(namespace string) *flow {
	f, ok := g.flows[namespace]
	if !ok {
		f = &flow{vtime: g.vnow, estimate: minEstimate.Seconds()}
		g.flows[namespace] = f
	}
	return f
}

// grantLocked takes a slot for f: its start tag is its virtual time lifted to vnow, and
// it is charged its estimate. It returns the charge.
func (g *evalGate) grantLocked(f *flow, weight float64) float64 {
	start := max(f.vtime, g.vnow)
	g.vnow = start
	f.vtime = start + f.estimate/weight
	f.inflight++
	g.busy++
	return f.estimate
}

// dispatchLocked grants free slots to the waiting evaluations of the flows with the
// lowest start tags.
func (g *evalGate) dispatchLocked() {
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
func (g *evalGate) pruneLocked(namespace string, f *flow) {
	if f.inflight == 0 && len(f.queue) == 0 && f.vtime <= g.vnow {
		delete(g.flows, namespace)
	}
}

// DefaultPassBudget is the default CEL budget of one pass over one Release, in CEL cost
// units: 2,000 times celbound.CostLimit (the per-expression limit). One CostLimit is
// about 25 ms of CPU for a comprehension on a current core (at most about 0.1 s), so the
// budget is about 50 s of CPU. A Release of 50 ConfigMaps under nine near-limit rules
// (about 200 ms of CPU per object) spends a fifth of it; 100 entries under 256
// near-limit rules would hold a worker for ten minutes without it.
const DefaultPassBudget = 2000 * celbound.CostLimit

// FairOptions configure the loop's fair evaluation (docs/operations.md, "Tenants and
// fairness").
type FairOptions struct {
	// PassBudget bounds the summed CEL cost of the rule evaluations of one pass over one
	// Release, in CEL cost units (celbound.Meter); 0 means no budget. The entries that a
	// pass could not evaluate within it are Unknown with a message that names the budget;
	// their firstUnhealthy and assessedRenderRef stay as they were.
	PassBudget uint64
	// Slots bounds the rule evaluations in flight across all passes; 0 means GOMAXPROCS.
	Slots int
	// Weight returns the share of evaluation CPU of a namespace relative to others when
	// they compete (a weight of 2 gets twice the CPU of 1); nil, or a value <= 0, means 1.
	Weight func(namespace string) float64
}

// fairState is the loop's fair-evaluation state.
type fairState struct {
	once sync.Once
	gate *evalGate
	pass atomic.Uint64
}

// passTenant is what the evaluations of one pass share: the Release's namespace (the
// tenant), its weight, the pass's number and its budget.
type passTenant struct {
	namespace string
	weight    float64
	pass      uint64
	meter     *celbound.Meter
}

// newPassTenant starts the fair-evaluation bookkeeping of one pass over a Release of
// namespace.
func (h *HealthController) newPassTenant(namespace string) *passTenant {
	h.fair.once.Do(func() { h.fair.gate = newEvalGate(h.Fair.Slots) })
	w := 1.0
	if h.Fair.Weight != nil {
		if v := h.Fair.Weight(namespace); v > 0 {
			w = v
		}
	}
	return &passTenant{namespace: namespace, weight: w, pass: h.fair.pass.Add(1), meter: celbound.NewMeter(h.Fair.PassBudget)}
}

// evaluate runs ev on one object through the gate, within the pass's budget, and
// counts its CPU and cost for the namespace. It returns celbound.ErrBudgetExhausted when
// the budget ran out first, and ctx.Err() when ctx ended while it waited.
func (h *HealthController) evaluate(ctx context.Context, pt *passTenant, ev *health.Evaluator, apiVersion, resource string, object map[string]any) (health.Result, error) {
	if pt.meter.Exhausted() {
		return health.Result{}, celbound.ErrBudgetExhausted
	}
	t, err := h.fair.gate.acquire(ctx, pt.namespace, pt.weight, pt.pass)
	if err != nil {
		return health.Result{}, err
	}
	r, u, err := ev.EvaluateMetered(ctx, pt.meter, apiVersion, resource, object)
	t.done(u.CPU)
	evaluationWait.WithLabelValues(pt.namespace).Observe(t.waited.Seconds())
	evaluationCPU.WithLabelValues(pt.namespace).Add(u.CPU.Seconds())
	evaluationCost.WithLabelValues(pt.namespace).Add(float64(u.Cost))
	return r, err
}

// budgetMessage is the message of an entry that a pass could not evaluate within budget.
func budgetMessage(budget uint64) string {
	return fmt.Sprintf("not evaluated: this pass spent its evaluation budget of %d CEL cost units (--pass-evaluation-budget) on other entries of the Release; the next pass tries again", budget)
}

// budgetCut returns the result of an entry that the pass could not evaluate within its
// budget: Unknown, with the message, and the entry's firstUnhealthy and
// assessedRenderRef as they were (the entry was not judged, so neither its anchor nor
// its render moves).
func (h *HealthController) budgetCut(r itemResult) itemResult {
	r.state, r.message, r.anchor, r.cut = v1alpha1.StateUnknown, budgetMessage(h.Fair.PassBudget), r.prior.firstUnhealthy, true
	// writeInventoryHealth writes entry.RenderRef as assessedRenderRef: keep the old one.
	r.entry.RenderRef = r.prior.assessedRenderRef
	return r
}

// countCut counts the entries of results that the budget cut, for the metrics, and
// records whether the Release's pass was cut; it reports the count and whether the
// pass before was cut too.
func (h *HealthController) countCut(namespace, key string, results []itemResult) (cut int, before bool) {
	for i := range results {
		if results[i].cut {
			cut++
		}
	}
	h.remember(key, func(m *releaseMemory) { before, m.budgetCut = m.budgetCut, cut > 0 })
	if cut > 0 {
		budgetCuts.WithLabelValues(namespace).Inc()
		budgetCutEntries.WithLabelValues(namespace).Add(float64(cut))
	}
	return cut, before
}

// recordBudgetEvent records an EvaluationBudgetExceeded Event on rel when its pass was
// cut by the budget and the pass before was not (an edge, not every pass).
func (h *HealthController) recordBudgetEvent(rel *v1alpha1.Release, a *assessment) {
	if h.Events == nil || a == nil || a.budgetCut == 0 || a.budgetCutBefore {
		return
	}
	h.Events.Eventf(rel, nil, corev1.EventTypeWarning, EventEvaluationBudgetExceeded, actionAssess, "%s",
		truncateNote(fmt.Sprintf("%d of %d entries not evaluated: the pass spent its evaluation budget of %d CEL cost units (--pass-evaluation-budget); they are Unknown until a pass evaluates them. Make the rules cheaper or raise the budget (docs/operations.md, \"Tenants and fairness\")",
			a.budgetCut, len(a.entries), h.Fair.PassBudget)))
}

// EventEvaluationBudgetExceeded is the reason of the Warning Event of a pass that could
// not evaluate every entry within its budget (on the edge from a pass that could).
const EventEvaluationBudgetExceeded = "EvaluationBudgetExceeded"
