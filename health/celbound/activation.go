package celbound

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Activation is the input of the programs of a Guard: the value of the environment's
// variable, and the budgets that evaluations through it are charged to (CostLimit per
// expression, and the Meter given to Reset, if any). Use one from one goroutine at a
// time; it can be reused after Reset.
type Activation struct {
	a activation
}

// activation is what cel-go sees of an Activation (it implements
// interpreter.Activation): the guard finds it from any frame of an evaluation.
type activation struct {
	variable  string // the Guard's variable
	value     any
	remaining uint64 // of the running expression's budget
	prefixes  prefixCache
	// meter is the budget of the caller's group of evaluations (meter.go), nil for
	// none; spent is what the expressions since Reset charged to it.
	meter *Meter
	spent uint64
}

// NewActivation returns an Activation for the programs of g, without a Meter and with
// no value bound (the variable then reads as null).
func (g *Guard) NewActivation() *Activation {
	return &Activation{a: activation{variable: g.variable}}
}

// Reset starts a new evaluation through a, charged to m (nil for no Meter: only the
// per-expression budget): it forgets the value bound and the cost spent.
func (a *Activation) Reset(m *Meter) {
	a.a.value, a.a.meter, a.a.spent = nil, m, 0
}

// Bind sets the value of the environment's variable for the following Evals.
func (a *Activation) Bind(value any) { a.a.value = value }

// Spent returns the cost units that the Evals since Reset charged to the Meter (0
// without a Meter).
func (a *Activation) Spent() uint64 { return a.a.spent }

// Eval evaluates p, a program planned by the Guard of a, on the value bound, within a
// fresh budget of CostLimit, or of what is left of the Meter's budget when that is less.
// It stops once ctx (when not nil) is done, as cel-go's ContextEval does, and in the
// middle of an expression too (see Guard.Plan). An expression over its budget returns
// the error "operation cancelled: actual cost limit exceeded", or ErrBudgetExhausted
// when it was the Meter's budget that ran out. A panic inside the evaluation is an
// error too ("internal error: ..."), never a crash.
func (a *Activation) Eval(ctx context.Context, p cel.Program) (out ref.Val, err error) {
	act := &a.a
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("internal error: %v", r)
		}
	}()
	limit := act.reserve()
	act.remaining = limit
	act.prefixes.epoch++ // forget the parent maps of the previous evaluation
	defer func() {
		if act.settle(limit, act.remaining, err) {
			err = ErrBudgetExhausted
		}
	}()
	if ctx != nil {
		out, _, err = p.ContextEval(ctx, act)
	} else {
		out, _, err = p.Eval(act)
	}
	return out, err
}

// ResolveName resolves the only variable.
func (a *activation) ResolveName(name string) (any, bool) {
	if name == a.variable {
		return a.value, true
	}
	return nil, false
}

// Parent returns nil: the activation is the root.
func (a *activation) Parent() interpreter.Activation { return nil }

// reserve takes the budget of one expression: CostLimit, or what is left of the
// Meter's budget when that is less (0 when nothing is left). Without a Meter it
// reserves CostLimit.
func (a *activation) reserve() uint64 {
	m := a.meter
	if m == nil || m.unlimited {
		return CostLimit
	}
	for {
		left := m.left.Load()
		if left <= 0 {
			return 0
		}
		r := min(int64(CostLimit), left)
		if m.left.CompareAndSwap(left, left-r) {
			return uint64(r)
		}
	}
}

// settle charges to the Meter what an expression used of its reservation limit
// (remaining is what it left), gives the rest back, and reports whether the expression
// stopped (err) because the Meter's budget, not CostLimit, ran out.
func (a *activation) settle(limit, remaining uint64, err error) bool {
	m := a.meter
	if m == nil {
		return false
	}
	used := limit - min(remaining, limit)
	m.used.Add(used)
	a.spent += used
	if m.unlimited {
		return false
	}
	m.left.Add(int64(limit - used))
	return err != nil && limit < CostLimit && remaining == 0
}

// budgetOf returns the activation that holds the budget of the evaluation act belongs
// to (found through cel-go's frames and child activations), or nil when act is not one
// of ours: a program run outside Activation.Eval then has no budget per expression, and
// charge bounds each call by CostLimit on its own.
func budgetOf(act interpreter.Activation) *activation {
	for act != nil {
		switch a := act.(type) {
		case *activation:
			return a
		case *interpreter.ExecutionFrame:
			act = a.Activation
		default:
			act = act.Parent()
		}
	}
	return nil
}

// costExceeded is the panic that stops an evaluation over its budget; cel-go's Eval
// recovers it into its usual error, "operation cancelled: actual cost limit exceeded".
var costExceeded = interpreter.EvalCancelledError{
	Cause:   interpreter.CostLimitExceeded,
	Message: "operation cancelled: actual cost limit exceeded",
}

// interrupted is the panic that stops an evaluation whose context is done (see
// Activation.Eval); cel-go's Eval recovers it into an error.
var interrupted = interpreter.EvalCancelledError{
	Cause:   interpreter.ContextCancelled,
	Message: "operation interrupted",
}

// checkInterrupt stops the evaluation when its context is done. It looks at the context
// every interruptCheckFrequency calls (cel-go's own counter, shared with comprehensions).
func checkInterrupt(act interpreter.Activation) {
	if f, ok := act.(*interpreter.ExecutionFrame); ok && f != nil && f.CheckInterrupt() {
		panic(interrupted)
	}
}

// charge takes cost from the budget of the evaluation, or stops it; it stops it too
// when the evaluation's context is done.
func charge(act interpreter.Activation, cost uint64) {
	checkInterrupt(act)
	a := budgetOf(act)
	if a == nil {
		if cost > CostLimit {
			panic(costExceeded)
		}
		return
	}
	if cost > a.remaining {
		a.remaining = 0
		panic(costExceeded)
	}
	a.remaining -= cost
}

// remaining is the budget left, in the units sizeOf counts (bytes, elements), for
// bounding the walks of sizeOf.
func remaining(act interpreter.Activation) uint64 {
	if a := budgetOf(act); a != nil {
		return sat(a.remaining, traversalFactor)
	}
	return sat(CostLimit, traversalFactor)
}

// sat multiplies without overflow.
func sat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return ^uint64(0)
	}
	return lo
}
