package healthloop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/celbound"
	"github.com/kumodo/convoy-observer/internal/fairshare"
)

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
	gate *fairshare.Gate
	pass atomic.Uint64
}

// passTenant is what the evaluations of one pass share: the Release's namespace (the
// tenant), its weight, the pass's number and its budget.
type passTenant struct {
	namespace string
	weight    float64
	pass      uint64
	meter     *celbound.Meter
	// diagnoses counts the failing workloads this pass diagnosed (MaxDiagnosesPerPass).
	diagnoses diagnoses
}

// newPassTenant starts the fair-evaluation bookkeeping of one pass over a Release of
// namespace.
func (h *HealthController) newPassTenant(namespace string) *passTenant {
	h.fair.once.Do(func() { h.fair.gate = fairshare.NewGate(h.Fair.Slots) })
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
	t, err := h.fair.gate.Acquire(ctx, pt.namespace, pt.weight, pt.pass)
	if err != nil {
		return health.Result{}, err
	}
	r, u, err := ev.EvaluateMetered(ctx, pt.meter, apiVersion, resource, object)
	t.Done(u.CPU)
	evaluationWait.WithLabelValues(pt.namespace).Observe(t.Waited.Seconds())
	evaluationCPU.WithLabelValues(pt.namespace).Add(u.CPU.Seconds())
	evaluationCost.WithLabelValues(pt.namespace).Add(float64(u.Cost))
	return r, err
}

// budgetMessage is the message of an entry that a pass could not evaluate within budget.
func budgetMessage(budget uint64) string {
	return fmt.Sprintf("not evaluated: this pass spent its evaluation budget of %d CEL cost units (--pass-evaluation-budget) on other entries of the Release; the next pass tries again", budget)
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

// namespaceRetry is when a pass that found its namespace at NamespaceWorkers comes back:
// soon, since a namespace's passes usually take milliseconds (a single tenant's cold start
// waits on it: with a second it converged a second later at 100 Releases). A slow
// tenant's throttled keys then retry four times a second, a map lookup each.
const namespaceRetry = 250 * time.Millisecond

// namespacePasses counts the passes in flight per namespace, for NamespaceWorkers.
type namespacePasses struct {
	mu       sync.Mutex
	inFlight map[string]int
}

// acquire counts one more pass of namespace, unless max are in flight already.
func (p *namespacePasses) acquire(namespace string, max int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight[namespace] >= max {
		return false
	}
	if p.inFlight == nil {
		p.inFlight = map[string]int{}
	}
	p.inFlight[namespace]++
	return true
}

// release counts one pass of namespace less; a namespace with none goes from the map.
func (p *namespacePasses) release(namespace string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight[namespace]--; p.inFlight[namespace] <= 0 {
		delete(p.inFlight, namespace)
	}
}
