package health

import (
	"math/bits"

	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// The call guard bounds every library call of a rule before it runs.
//
// cel-go charges the cost of a call after the call has returned, from its arguments and
// its result. A call whose work is far larger than its inputs (`s.replace('a', <1000
// a's>)` nested three times, `join` over a list built from a large object, `indexOf`
// over a long string) therefore runs to the end before anything is charged: it can take
// seconds or exhaust memory, and a fatal out-of-memory error cannot be recovered. The
// guard is a program decorator that replaces each call node with one that evaluates the
// arguments, computes an upper bound of the call's work and result size from them
// (callCost), charges it to the evaluation's budget (CostLimit per expression, held in
// the activation) and only then calls the implementation. A call that would exceed the
// budget stops the evaluation with cel-go's own cost error.
//
// The guard is kept only for what cel-go's public facilities cannot do: its CostLimit
// charges after the call, and its interrupts (used by EvaluateContext) act only between
// comprehension iterations. What the guard must know of cel-go's internals to replace a
// call node is isolated in celgo.go, with the check to run on every cel-go upgrade.
//
// Calls that are O(1) whatever their arguments (arithmetic on numbers, negation,
// optional accessors, dyn, type) are left as they are; everything else, including
// functions not listed in costClasses, is guarded (unknown functions as linear).

// traversalFactor is how many bytes or elements one cost unit pays for, as cel-go's
// StringTraversalCostFactor (0.1).
const traversalFactor = 10

// costExceeded is the panic that stops an evaluation over its budget; cel-go's Eval
// recovers it into its usual error, "operation cancelled: actual cost limit exceeded".
var costExceeded = interpreter.EvalCancelledError{
	Cause:   interpreter.CostLimitExceeded,
	Message: "operation cancelled: actual cost limit exceeded",
}

// evalActivation is the activation of one evaluation of one expression: the object and
// the budget left. It is pooled by the Evaluator; the guard finds it from any frame.
type evalActivation struct {
	object    any
	remaining uint64
	prefixes  prefixCache
	// meter is the budget of the caller's group of evaluations (meter.go), nil for none;
	// cutByMeter says that the last expression stopped because that budget, not
	// CostLimit, ran out.
	meter      *meterCall
	cutByMeter bool
}

// ResolveName resolves the only variable, object.
func (a *evalActivation) ResolveName(name string) (any, bool) {
	if name == objectVariable {
		return a.object, true
	}
	return nil, false
}

// Parent returns nil: the activation is the root.
func (a *evalActivation) Parent() interpreter.Activation { return nil }

// budgetOf returns the activation that holds the budget of the evaluation act belongs
// to (found through cel-go's frames and child activations), or nil when act is not one
// of ours: a program run outside Evaluate then has no budget per expression, and
// charge bounds each call by CostLimit on its own.
func budgetOf(act interpreter.Activation) *evalActivation {
	for act != nil {
		switch a := act.(type) {
		case *evalActivation:
			return a
		case *interpreter.ExecutionFrame:
			act = a.Activation
		default:
			act = act.Parent()
		}
	}
	return nil
}

// interrupted is the panic that stops an evaluation whose context is done (see
// Evaluator.EvaluateContext); cel-go's Eval recovers it into an error.
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

// guardDecorator returns the program decorator that guards calls (see above). With
// counting, every other node except attributes and constants is also charged
// stepUnits per evaluation: that bounds comprehensions, whose loop condition and step are such
// nodes and run once per iteration. (cel-go's own runtime cost tracker does the same
// job, but its bookkeeping stack grows with every iteration and is searched from the
// top, which makes a comprehension over 10,000 elements take a third of a second within
// 4% of the budget; the guard replaces it.)
func guardDecorator(overloads map[string]*functions.Overload, counting bool) interpreter.InterpretableDecoratorV2 {
	slots := prefixSlots{}
	return func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		if fp, ok := i.(*fastPath); ok {
			i = fp.orig // the planner added a qualifier to the path: build it again
		}
		if c := foldLiteral(i); c != nil {
			return c, nil // literal.go
		}
		if !counting {
			if fp := newFastPath(i, slots); fp != nil {
				return fp, nil
			}
		}
		call, ok := i.(interpreter.InterpretableCall)
		if !ok || unguarded[call.Function()] {
			return countedNode(i, counting), nil
		}
		var impl *functions.Overload
		if call.OverloadID() != "" {
			impl = overloads[call.OverloadID()]
		}
		if impl == nil {
			impl = overloads[call.Function()]
		}
		eq := call.Function() == "_==_" || call.Function() == "_!=_"
		if impl == nil && !eq {
			return countedNode(i, counting), nil // nothing to call: cel-go's node and its error
		}
		if impl != nil && impl.NonStrict {
			return countedNode(i, counting), nil // not_strictly_false and the like: O(1), and they see errors
		}
		g := &guardedCall{
			id:       call.ID(),
			function: call.Function(),
			overload: call.OverloadID(),
			// Other decorators (constant folding, regex precompilation) and cel-go's
			// cost tracker look calls up by name: a prefixed name keeps them from
			// replacing the guard, and the tracker charges the guarded call 1.
			tagFunction: "guarded:" + call.Function(),
			tagOverload: "guarded:" + call.OverloadID(),
			args:        call.Args(),
			impl:        impl,
			class:       costClasses[call.Function()],
			ne:          call.Function() == "_!=_",
			eq:          eq,
		}
		if in := newInStrings(g); in != nil {
			return in, nil // literal.go
		}
		return g, nil
	}
}

// countedNode wraps i in a node that charges stepUnits per evaluation, when counting and
// i is neither an attribute (which the planner extends with further selections) nor a
// constant.
func countedNode(i interpreter.InterpretableV2, counting bool) interpreter.InterpretableV2 {
	if !counting {
		return i
	}
	switch i.(type) {
	case interpreter.InterpretableAttribute, interpreter.InterpretableConst:
		return i
	}
	return &counted{i}
}

// stepUnits is the charge of one counted step. Two units a step keep a comprehension
// that allocates a little every iteration (a string, a list element) within about
// 0.1 s of CPU and well within 64 MiB (TestEvaluationBounds).
const stepUnits = 2

// counted charges stepUnits, plus one a value for a list or map literal, then
// evaluates its node.
type counted struct {
	interpreter.InterpretableV2
}

// Exec implements interpreter.InterpretableV2.
func (c *counted) Exec(f *interpreter.ExecutionFrame) ref.Val {
	cost := uint64(stepUnits)
	if lit, ok := c.InterpretableV2.(interpreter.InterpretableConstructor); ok {
		cost += uint64(len(lit.InitVals()))
	}
	charge(f, cost)
	return c.InterpretableV2.Exec(f)
}

// Eval implements interpreter.Interpretable.
func (c *counted) Eval(act interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(act))
}

// guardedCall is a call node that charges its cost before it calls.
type guardedCall struct {
	id                       int64
	function, overload       string
	tagFunction, tagOverload string
	args                     []interpreter.InterpretableV2
	impl                     *functions.Overload
	class                    costClass
	eq, ne                   bool
}

// ID implements interpreter.Interpretable.
func (g *guardedCall) ID() int64 { return g.id }

// Eval implements interpreter.Interpretable.
func (g *guardedCall) Eval(act interpreter.Activation) ref.Val {
	return g.Exec(interpreter.AsFrame(act))
}

// Function implements interpreter.InterpretableCall with a tagged name (see guardDecorator).
func (g *guardedCall) Function() string { return g.tagFunction }

// OverloadID implements interpreter.InterpretableCall with a tagged name.
func (g *guardedCall) OverloadID() string { return g.tagOverload }

// Args implements interpreter.InterpretableCall.
func (g *guardedCall) Args() []interpreter.InterpretableV2 { return g.args }

// Exec evaluates the arguments, charges the call and runs it, as cel-go's call nodes do
// (an error or unknown argument is the result; a receiver type may implement the call).
func (g *guardedCall) Exec(f *interpreter.ExecutionFrame) ref.Val {
	switch len(g.args) {
	case 1:
		a := g.args[0].Exec(f)
		if types.IsUnknownOrError(a) {
			return a
		}
		if g.class == costQuantity && g.impl != nil && g.impl.Unary != nil {
			if r := boundedQuantityCall(f, g.function, a, g.impl.Unary); r != nil {
				return types.LabelErrNode(g.id, r)
			}
		}
		charge(f, g.cost(f, a, nil, nil))
		return g.dispatch1(a)
	case 2:
		return g.exec2(f, g.args[0].Exec(f), g.args[1].Exec(f))
	default:
		return g.execN(f)
	}
}

// exec2 is Exec of a call with two arguments, once they are evaluated.
func (g *guardedCall) exec2(f *interpreter.ExecutionFrame, a, b ref.Val) ref.Val {
	if types.IsUnknownOrError(a) {
		return a
	}
	if types.IsUnknownOrError(b) {
		return b
	}
	if g.class == costRegexBounded {
		if r := boundedRegexCall(f, g.function, []ref.Val{a, b}); r != nil {
			return types.LabelErrNode(g.id, r)
		}
	}
	if !(g.eq && isScalar(a) && isScalar(b)) { // comparing two numbers costs nothing
		charge(f, g.cost(f, a, b, nil))
	}
	if g.eq {
		if g.ne {
			return types.Bool(types.Equal(a, b) != types.True)
		}
		return types.Equal(a, b)
	}
	return g.dispatch2(a, b)
}

// execN is Exec of a call with more than two arguments (or none).
func (g *guardedCall) execN(f *interpreter.ExecutionFrame) ref.Val {
	vals := make([]ref.Val, len(g.args))
	for i, arg := range g.args {
		vals[i] = arg.Exec(f)
		if types.IsUnknownOrError(vals[i]) {
			return vals[i]
		}
	}
	if g.class == costRegexBounded {
		if r := boundedRegexCall(f, g.function, vals); r != nil {
			return types.LabelErrNode(g.id, r)
		}
	}
	var a, b ref.Val
	if len(vals) > 0 {
		a = vals[0]
	}
	if len(vals) > 1 {
		b = vals[1]
	}
	charge(f, g.cost(f, a, b, vals))
	return g.callN(vals)
}
