package health

import (
	"math/bits"
	"strings"

	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	apiservercel "k8s.io/apiserver/pkg/cel"
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

// costClass says how callCost bounds one function.
type costClass uint8

const (
	costLinear       costClass = iota // work and result ≤ the arguments' sizes
	costCompare                       // ==, <, ...: ≤ the smaller argument
	costAdd                           // +: strings and bytes copy both; lists concatenate lazily
	costSize                          // size(): counts the runes of a string
	costReplace                       // string replace
	costSplit                         // string split
	costJoin                          // list join
	costIndexOf                       // string indexOf / lastIndexOf: runes and a naive search
	costFormat                        // string format
	costQuote                         // strings.quote: escapes can grow a byte to \u00XX
	costRange                         // lists.range(n): n elements
	costQuadratic                     // sets.*, distinct: every element against every other
	costSort                          // sort: n log n comparisons
	costParse                         // parsers: error messages quote the input, a unit a byte
	costRunes                         // string functions that convert to []rune first
	costQuantity                      // quantity(), isQuantity(): bounded and charged by boundedQuantityCall
	costRegexBounded                  // matches, find, findAll: compiled and run by boundedRegexCall
	costQuantityOp                    // methods of quantities (and semvers, which share names)
	costFlatten                       // flatten(list, depth)
	costTimestampGet                  // timestamp accessors: a time zone name costs tzUnits
)

// unguarded are the functions whose cost does not depend on their arguments.
var unguarded = map[string]bool{
	"!_": true, "-_": true, "_%_": true, "_*_": true, "_/_": true, "_-_": true,
	"dyn": true, "type": true,
	"optional.none": true, "optional.of": true, "optional.ofNonZeroValue": true,
	"hasValue": true, "value": true, "or": true, "orValue": true,
	"first": true, "last": true,
	// Logical operators and the conditional are planned as their own nodes, not calls,
	// and are never guarded; listed for completeness.
	"_&&_": true, "_||_": true, "_?_:_": true,
}

// costClasses gives the class of the functions whose work is not linear in their
// arguments. Functions not listed (and not unguarded) are costLinear.
var costClasses = map[string]costClass{
	"_==_": costCompare, "_!=_": costCompare, "_<_": costCompare, "_<=_": costCompare,
	"_>_": costCompare, "_>=_": costCompare,
	"_+_":         costAdd,
	"size":        costSize,
	"replace":     costReplace,
	"split":       costSplit,
	"join":        costJoin,
	"indexOf":     costIndexOf,
	"lastIndexOf": costIndexOf,
	"matches":     costRegexBounded, "find": costRegexBounded, "findAll": costRegexBounded,
	"format":                costFormat,
	"strings.quote":         costQuote,
	"lists.range":           costRange,
	"sets.contains":         costQuadratic,
	"sets.equivalent":       costQuadratic,
	"sets.intersects":       costQuadratic,
	"distinct":              costQuadratic,
	"sort":                  costSort,
	"@sortByAssociatedKeys": costSort,
	"flatten":               costFlatten,
	"add":                   costQuantityOp, "sub": costQuantityOp, "compareTo": costQuantityOp,
	"isGreaterThan": costQuantityOp, "isLessThan": costQuantityOp, "asInteger": costQuantityOp,
	"asApproximateFloat": costQuantityOp, "isInteger": costQuantityOp, "sign": costQuantityOp,
	"getDate": costTimestampGet, "getDayOfMonth": costTimestampGet, "getDayOfWeek": costTimestampGet,
	"getDayOfYear": costTimestampGet, "getFullYear": costTimestampGet, "getHours": costTimestampGet,
	"getMilliseconds": costTimestampGet, "getMinutes": costTimestampGet, "getMonth": costTimestampGet,
	"getSeconds": costTimestampGet,
	// Parsers and validators allocate several times their input (runes, error messages
	// that quote it): a whole unit per byte.
	"ip": costParse, "isIP": costParse, "ip.isCanonical": costParse, "cidr": costParse,
	"isCIDR": costParse, "url": costParse, "isURL": costParse, "semver": costParse,
	"isSemver": costParse, "quantity": costQuantity, "isQuantity": costQuantity,
	"timestamp": costParse, "duration": costParse, "int": costParse, "uint": costParse,
	"double": costParse, "bool": costParse, "validate": costParse,
	"containsIP": costParse, "containsCIDR": costParse,
	// Rune-indexed string functions: []rune of the input (4 bytes a rune) first.
	"charAt": costRunes, "substring": costRunes, "reverse": costRunes,
	"lowerAscii": costRunes, "upperAscii": costRunes, "trim": costRunes,
}

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

// remainingBudget returns the budget left in the evaluation of act (CostLimit when act
// is not one of ours: a program run outside Evaluate still has a per-call bound).
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
		return &guardedCall{
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
		}, nil
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
		a := g.args[0].Exec(f)
		b := g.args[1].Exec(f)
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
	default:
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
}

// cost is an upper bound, in cost units, of the work and the result size of the call
// with arguments a, b (nil when absent) and all of them in rest (nil for one or two
// arguments). Sizes are counted by sizeOf, never past the budget left.
func (g *guardedCall) cost(f *interpreter.ExecutionFrame, a, b ref.Val, rest []ref.Val) uint64 {
	limit := remaining(f)
	size := func(v ref.Val) uint64 {
		if v == nil {
			return 0
		}
		return sizeOf(v, limit)
	}
	units := func(n uint64) uint64 { return 1 + n/traversalFactor }
	switch g.class {
	case costCompare:
		if isQuantity(a) || isQuantity(b) {
			return quantityOpCost(a, b)
		}
		if isScalar(a) || isScalar(b) {
			return 1
		}
		return units(min(size(a), size(b)))
	case costAdd:
		switch a.(type) {
		case types.String, types.Bytes:
			return units(size(a) + size(b))
		}
		return 1 + count(b) // a list grows by b's elements
	case costSize:
		if s, ok := a.(types.String); ok {
			return units(uint64(len(s)))
		}
		return 1
	case costReplace:
		s, old, repl := str(a), str(b), ""
		n := int64(-1)
		if len(rest) > 2 {
			repl = str(rest[2])
		}
		if len(rest) > 3 {
			if i, ok := rest[3].(types.Int); ok {
				n = int64(i)
			}
		}
		count := uint64(len(s)) + 1 // replacements possible: one per byte for an empty old
		if old != "" {
			count = uint64(len(s)/len(old)) + 1
		}
		if n >= 0 && uint64(n) < count {
			count = uint64(n)
		}
		return units(uint64(len(s)) + sat(count, uint64(len(repl))))
	case costSplit:
		s, sep := str(a), str(b)
		parts := uint64(len(s)) + 1
		if sep != "" {
			parts = uint64(len(s)/len(sep)) + 1
		}
		return units(uint64(len(s))) + parts
	case costJoin:
		return units(size(a) + sat(count(a), uint64(len(str(b)))))
	case costIndexOf:
		s, ok := a.(types.String)
		if !ok { // the list function of the same name: linear
			return units(size(a) + size(b))
		}
		sub := str(b)
		// []rune of both (4 bytes a rune) and a naive search of every offset.
		return units(4*uint64(len(s)+len(sub)) + sat(uint64(len(s)), uint64(max(len(sub), 1))))
	case costFormat:
		// Every argument printed in full (a number up to 32 bytes), plus the widest
		// precision the format string could ask for once per verb.
		verbs := uint64(strings.Count(str(a), "%"))
		return units(size(a) + sat(32, size(b)) + sat(verbs, 1000))
	case costParse:
		return 1 + size(a) + size(b)
	case costRunes:
		if _, ok := a.(types.String); ok {
			return units(sat(4, size(a)))
		}
		return units(size(a) + size(b)) // the list function of the same name
	case costQuote:
		return units(sat(6, size(a)))
	case costRange:
		if n, ok := a.(types.Int); ok && n > 0 {
			return 1 + uint64(n)
		}
		return 1
	case costQuadratic:
		// Every element of one list against all of the other (or itself).
		if b == nil {
			return units(sat(size(a), count(a)+1))
		}
		return units(sat(size(a), count(b)+1))
	case costQuantityOp:
		if isQuantity(a) || isQuantity(b) {
			return quantityOpCost(a, b)
		}
		return units(size(a) + size(b)) // semver's methods of the same names
	case costFlatten:
		return flattenCost(f, a, b)
	case costTimestampGet:
		if _, ok := b.(types.String); ok {
			return tzUnits + size(b) // the name is copied into every path tried
		}
		return 1
	case costQuantity, costRegexBounded:
		// Arguments the bounded calls do not take: the implementation reports them.
		return units(size(a) + size(b))
	case costSort:
		return units(sat(size(a), uint64(bits.Len64(count(a))+1)))
	default:
		total := uint64(0)
		if rest == nil {
			total = size(a) + size(b)
		} else {
			for _, v := range rest {
				total += size(v)
				if total > limit {
					break
				}
			}
		}
		return units(total)
	}
}

// count is the number of elements of a list or entries of a map, 0 for anything else.
func count(v ref.Val) uint64 {
	if l, ok := v.(traits.Sizer); ok {
		if n, ok := l.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 0
}

// str is the Go string of a CEL string, or "" for anything else.
func str(v ref.Val) string {
	s, _ := v.(types.String)
	return string(s)
}

// isQuantity reports whether v is a Kubernetes quantity.
func isQuantity(v ref.Val) bool {
	_, ok := v.(apiservercel.Quantity)
	return ok
}

// isScalar reports whether v is a value whose comparison is O(1).
func isScalar(v ref.Val) bool {
	switch v.(type) {
	case types.Int, types.Uint, types.Double, types.Bool, types.Null:
		return true
	}
	return false
}
