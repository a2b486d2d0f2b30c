package health

import (
	"context"
	"time"

	"github.com/kumodo/convoy-observer/health/celbound"
)

// Usage is the work of one evaluation.
type Usage struct {
	// Cost is the sum of the CEL cost units that the bound (package celbound) charged to
	// the evaluated expressions: the library calls by the sizes of their arguments, and
	// in an expression with comprehensions every step. Field selections without calls
	// are free.
	Cost uint64
	// CPU is the CPU time of the evaluating thread during the evaluation (on Linux, from
	// CLOCK_THREAD_CPUTIME_ID; elsewhere the wall time), including the rules' own garbage
	// collection assists.
	CPU time.Duration
}

// EvaluateMetered is Evaluate within m's budget (see celbound.Meter): it returns the
// Result and the Usage of this evaluation, which it also adds to m. When the budget runs
// out before the applicable rules decide, it returns celbound.ErrBudgetExhausted and no
// Result; the Usage then counts what was spent. ctx, when not nil, stops it as in
// EvaluateContext (ctx.Err() and no Result). A nil m is a Meter without a budget.
func (e *Evaluator) EvaluateMetered(ctx context.Context, m *celbound.Meter, apiVersion, resource string, object map[string]any) (Result, Usage, error) {
	if m == nil {
		m = celbound.NewMeter(0)
	}
	var (
		r     Result
		spent uint64
		err   error
	)
	cpu := m.Measure(func() { r, spent, err = e.evaluate(ctx, m, apiVersion, resource, object) })
	return r, Usage{Cost: spent, CPU: cpu}, err
}
