package celbound

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"
)

// ErrBudgetExhausted is the error of an expression stopped because its Meter's budget,
// not CostLimit, ran out (Activation.Eval). The evaluation decided nothing.
var ErrBudgetExhausted = errors.New("evaluation budget exhausted")

// Meter is the shared CEL budget of a group of evaluations, such as the health loop's
// evaluations of one Release's entries in one pass: it bounds their summed cost, as the
// API server's per-call CEL budget bounds the expressions of one request next to the
// per-expression CostLimit. It counts the cost units and CPU time spent through it. It
// is safe for concurrent use by the evaluations of the group.
//
// Every expression still has its own CostLimit; an expression gets at most what is left
// of the budget, and one that runs out of it stops like one over CostLimit, but with
// ErrBudgetExhausted instead of the cost error. So the group never spends more than its
// budget. When evaluations run concurrently, each reserves up to CostLimit before an
// expression and gives back what it did not use, so near the end of the budget an
// evaluation may be cut while another one's reservation is still out: the budget is a
// bound, not a promise to spend all of it.
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

// Used returns the cost units charged through m so far.
func (m *Meter) Used() uint64 { return m.used.Load() }

// CPU returns the CPU time of the evaluations through m so far (see Measure).
func (m *Meter) CPU() time.Duration { return time.Duration(m.cpu.Load()) }

// Exhausted reports whether m has a budget and nothing of it is left to reserve.
func (m *Meter) Exhausted() bool { return !m.unlimited && m.left.Load() <= 0 }

// Measure runs evaluate, an evaluation charged to m, and returns the CPU time of the
// evaluating thread during it, which it also adds to m's CPU: on Linux from
// CLOCK_THREAD_CPUTIME_ID, elsewhere the wall time; the rules' own garbage collection
// assists included. The goroutine stays on its thread meanwhile, so that the thread's
// clock measures only this evaluation.
func (m *Meter) Measure(evaluate func()) time.Duration {
	runtime.LockOSThread()
	start := threadCPU()
	evaluate()
	cpu := threadCPU() - start
	runtime.UnlockOSThread()
	m.cpu.Add(int64(cpu))
	return cpu
}
