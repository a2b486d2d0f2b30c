package health

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"
)

// ErrBudgetExhausted is the error of EvaluateMetered when the Meter's budget ran out
// before the rules decided: the object was not judged, and no Result is given.
var ErrBudgetExhausted = errors.New("evaluation budget exhausted")

// Meter is the shared CEL budget of a group of evaluations, such as the health loop's
// evaluations of one Release's entries in one pass: it bounds their summed cost, as the
// API server's per-call CEL budget bounds the expressions of one request next to the
// per-expression CostLimit. It counts the cost units and CPU time spent through it. It
// is safe for concurrent use by the evaluations of the group.
//
// Every expression still has its own CostLimit; an expression gets at most what is left
// of the budget, and one that runs out of it stops like one over CostLimit, but the
// evaluation then ends with ErrBudgetExhausted instead of an evaluation error. So the
// group never spends more than its budget. When evaluations run concurrently, each
// reserves up to CostLimit before an expression and gives back what it did not use, so
// near the end of the budget an evaluation may be cut while another one's reservation is
// still out: the budget is a bound, not a promise to spend all of it.
type Meter struct {
	unlimited bool
	left      atomic.Int64  // cost units not yet reserved
	used      atomic.Uint64 // cost units charged
	cpu       atomic.Int64  // nanoseconds of CPU time
}

// NewMeter returns a Meter with a budget of budget cost units (CEL cost units, as
// CostLimit); 0 means no budget (only counting).
func NewMeter(budget uint64) *Meter {
	m := &Meter{unlimited: budget == 0}
	m.left.Store(int64(min(budget, uint64(1)<<62)))
	return m
}

// Usage is the work of one evaluation.
type Usage struct {
	// Cost is the sum of the CEL cost units that the call guard (guard.go) charged to the
	// evaluated expressions: the library calls by the sizes of their arguments, and in an
	// expression with comprehensions every step. Field selections without calls are free.
	Cost uint64
	// CPU is the CPU time of the evaluating thread during the evaluation (on Linux, from
	// CLOCK_THREAD_CPUTIME_ID; elsewhere the wall time), including the rules' own garbage
	// collection assists.
	CPU time.Duration
}

// Used returns the cost units charged through m so far.
func (m *Meter) Used() uint64 { return m.used.Load() }

// CPU returns the CPU time of the evaluations through m so far.
func (m *Meter) CPU() time.Duration { return time.Duration(m.cpu.Load()) }

// Exhausted reports whether m has a budget and nothing of it is left to reserve.
func (m *Meter) Exhausted() bool { return !m.unlimited && m.left.Load() <= 0 }

// EvaluateMetered is Evaluate within m's budget (see Meter): it returns the Result and
// the Usage of this evaluation, which it also adds to m. When the budget runs out before
// the applicable rules decide, it returns ErrBudgetExhausted and no Result; the Usage
// then counts what was spent. ctx, when not nil, stops it between two expressions as in
// EvaluateContext (ctx.Err() and no Result). A nil m is a Meter without a budget.
func (e *Evaluator) EvaluateMetered(ctx context.Context, m *Meter, apiVersion, resource string, object map[string]any) (Result, Usage, error) {
	if m == nil {
		m = NewMeter(0)
	}
	// The thread's CPU clock measures only this evaluation while the goroutine stays on
	// the thread.
	runtime.LockOSThread()
	start := threadCPU()
	r, spent, err := e.evaluateSpent(ctx, m, apiVersion, resource, object)
	cpu := threadCPU() - start
	runtime.UnlockOSThread()
	m.cpu.Add(int64(cpu))
	return r, Usage{Cost: spent, CPU: cpu}, err
}

// evaluateSpent runs evaluate and returns the cost units it charged to m.
func (e *Evaluator) evaluateSpent(ctx context.Context, m *Meter, apiVersion, resource string, object map[string]any) (Result, uint64, error) {
	var spent uint64
	r, err := e.evaluate(ctx, &meterCall{Meter: m, spent: &spent}, apiVersion, resource, object)
	return r, spent, err
}

// meterCall is the Meter of one evaluation, which also counts that evaluation's cost.
type meterCall struct {
	*Meter
	spent *uint64
}

// exhausted reports whether no budget is left before an expression starts.
func (c *meterCall) exhausted() bool { return c != nil && c.Exhausted() }

// reserve takes the budget of one expression: CostLimit, or what is left of the
// Meter's budget when that is less (0 when nothing is left). A nil c reserves CostLimit.
func (c *meterCall) reserve() uint64 {
	if c == nil || c.unlimited {
		return CostLimit
	}
	for {
		left := c.left.Load()
		if left <= 0 {
			return 0
		}
		r := min(int64(CostLimit), left)
		if c.left.CompareAndSwap(left, left-r) {
			return uint64(r)
		}
	}
}

// settle charges what an expression used of its reservation limit (remaining is what it
// left), gives the rest back, and reports whether the expression stopped (err) because
// the Meter's budget, not CostLimit, ran out.
func (c *meterCall) settle(limit, remaining uint64, err error) bool {
	if c == nil {
		return false
	}
	used := limit - min(remaining, limit)
	c.used.Add(used)
	*c.spent += used
	if c.unlimited {
		return false
	}
	c.left.Add(int64(limit - used))
	return err != nil && limit < CostLimit && remaining == 0
}
