package celbound

import (
	"fmt"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
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
// (guardedCall.cost, guardcost.go), charges it to the evaluation's budget (CostLimit per
// expression, held in the activation) and only then calls the implementation. A call
// that would exceed the budget stops the evaluation with cel-go's own cost error.
//
// The guard is kept only for what cel-go's public facilities cannot do: its CostLimit
// charges after the call, and its interrupts (ContextEval with InterruptCheckFrequency)
// act only between comprehension iterations. What the guard must know of cel-go's
// internals to replace a call node is isolated in celgo.go, with the check to run on
// every cel-go upgrade.
//
// Calls that are O(1) whatever their arguments (arithmetic on numbers, negation,
// optional accessors, dyn, type) are left as they are; everything else, including
// functions not listed in costClasses, is guarded (unknown functions as linear).

// CostLimit is the budget of one evaluation of one expression, in CEL cost units:
// Kubernetes' per-call limit for CEL validation rules (about 0.1 s of CPU).
const CostLimit = celconfig.PerCallLimit

// traversalFactor is how many bytes or elements one cost unit pays for, as cel-go's
// StringTraversalCostFactor (0.1).
const traversalFactor = 10

// Guard plans the programs of one CEL environment with the bound (see the package doc).
type Guard struct {
	// env is where programs are planned: the environment's types, variables and
	// functions, none of its program options (see NewGuard).
	env *cel.Env
	// overloads maps overload IDs and function names to their implementations, which
	// the guarded call nodes call themselves.
	overloads map[string]*functions.Overload
	// variable is the environment's one variable, bound by an Activation.
	variable string
}

// NewGuard returns the Guard of the programs of env, an environment whose only
// variable is variable (the value an Activation binds).
//
// The programs are not planned in env itself, since cel-go adds env's program options
// to every program and cannot take one away: Kubernetes' base environment sets cel-go's
// cost tracker and cost limit, which charge a call after it returned (the guard
// replaces them), and the constant folding and regex precompilation that the guard does
// its own way (literal.go, regexbounds.go). They are planned in an environment with
// env's type adapter and provider, variables and functions (implementations included),
// optional values (cel.OptionalTypes, whose decorator makes an optional's or and
// orValue short-circuit) and cross-type numeric comparisons, and no other program
// option.
func NewGuard(env *cel.Env, variable string) (*Guard, error) {
	fns := env.Functions()
	fdecls := make([]*decls.FunctionDecl, 0, len(fns))
	overloads := map[string]*functions.Overload{}
	for _, fn := range fns {
		fdecls = append(fdecls, fn)
		bindings, err := fn.Bindings()
		if err != nil {
			return nil, fmt.Errorf("function %s: %w", fn.Name(), err)
		}
		for _, b := range bindings {
			overloads[b.Operator] = b
		}
	}
	plan, err := cel.NewCustomEnv(
		cel.CustomTypeAdapter(env.CELTypeAdapter()),
		cel.CustomTypeProvider(env.CELTypeProvider()),
		cel.VariableDecls(env.Variables()...),
		cel.FunctionDecls(fdecls...),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
	)
	if err != nil {
		return nil, fmt.Errorf("planning environment: %w", err)
	}
	return &Guard{env: plan, overloads: overloads, variable: variable}, nil
}

// Plan plans checked, an expression type-checked in the Guard's environment, with the
// call guard: every call is charged from its arguments before it runs and, when the
// expression has a comprehension, every step of every iteration is charged too. An
// expression without comprehensions does at most as many steps as it has nodes besides
// its calls, so only its calls are charged. The program is meant to run through
// Activation.Eval, which gives it its budget; every interruptCheckFrequency
// comprehension iterations, charged calls or runes that a regular expression reads, it
// looks at the context of the evaluation.
func (g *Guard) Plan(checked *celast.AST) (cel.Program, error) {
	guard := guardDecorator(g.overloads, g.variable, hasComprehension(checked.Expr()))
	prg, err := g.env.PlanProgram(checked, cel.CustomDecoratorV2(guard), cel.InterruptCheckFrequency(interruptCheckFrequency))
	if err != nil {
		return nil, fmt.Errorf("planning the program: %w", err)
	}
	return prg, nil
}

// interruptCheckFrequency is how many comprehension iterations or charged calls pass
// between two looks at the context of an evaluation.
const interruptCheckFrequency = 64

// hasComprehension reports whether e contains a comprehension (all, exists, map,
// filter, cel.bind, ...): the only way an expression repeats work.
func hasComprehension(e celast.Expr) bool {
	found := false
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.ComprehensionKind {
			found = true
		}
	}))
	return found
}

// guardDecorator returns the program decorator that guards calls (see above). With
// counting, every other node except attributes and constants is also charged
// stepUnits per evaluation: that bounds comprehensions, whose loop condition and step are such
// nodes and run once per iteration. (cel-go's own runtime cost tracker does the same
// job, but its bookkeeping stack grows with every iteration and is searched from the
// top, which makes a comprehension over 10,000 elements take a third of a second within
// 4% of the budget; the guard replaces it.)
func guardDecorator(overloads map[string]*functions.Overload, variable string, counting bool) interpreter.InterpretableDecoratorV2 {
	slots := prefixSlots{}
	return func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		if fp, ok := i.(*fastPath); ok {
			i = fp.orig // the planner added a qualifier to the path: build it again
		}
		if c := foldLiteral(i); c != nil {
			return c, nil // literal.go
		}
		if !counting {
			if fp := newFastPath(i, slots, variable); fp != nil {
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
