package celbound

import (
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// Literal lists and maps that hold only constants, such as the reasons of
// `c.state.waiting.reason in ['CrashLoopBackOff', 'ImagePullBackOff']` or the default of
// `object.?status.?conditions.orValue([])`, are built once when the rule is compiled
// instead of on every evaluation (and, inside a comprehension, on every iteration); and
// `x in [...]` over a constant list of strings is one lookup in a set when x is a string.
// cel-go does both with its OptOptimize option, which the call guard's decorator hides
// the calls from (guard.go), so the guard does them itself. A constant costs nothing to
// evaluate and is not charged; the set lookup is charged like a comparison of x.

// foldLiteral returns a constant for a list or map literal whose elements (keys and
// values) are all constants, or nil.
func foldLiteral(i interpreter.InterpretableV2) interpreter.InterpretableV2 {
	lit, ok := i.(interpreter.InterpretableConstructor)
	if !ok || (lit.Type() != types.ListType && lit.Type() != types.MapType) {
		return nil
	}
	for _, v := range lit.InitVals() {
		if _, ok := v.(interpreter.InterpretableConst); !ok {
			return nil
		}
	}
	v := lit.Eval(interpreter.EmptyActivation())
	if types.IsUnknownOrError(v) {
		return nil // a duplicate map key, say: cel-go reports it on every evaluation
	}
	return interpreter.NewConstValue(lit.ID(), v)
}

// inStrings is `x in L` where L is a constant list of strings: a set lookup when x is
// a string, the guarded call otherwise.
type inStrings struct {
	*guardedCall
	set map[string]struct{}
}

// newInStrings returns an inStrings for g when g is `_ in <constant list of strings>`,
// or nil.
func newInStrings(g *guardedCall) interpreter.InterpretableV2 {
	if g.function != operators.In || len(g.args) != 2 {
		return nil
	}
	c, ok := g.args[1].(interpreter.InterpretableConst)
	if !ok {
		return nil
	}
	list, ok := c.Value().(traits.Lister)
	if !ok {
		return nil
	}
	set := map[string]struct{}{}
	for it := list.Iterator(); it.HasNext() == types.True; {
		s, ok := it.Next().(types.String)
		if !ok {
			return nil
		}
		set[string(s)] = struct{}{}
	}
	return &inStrings{guardedCall: g, set: set}
}

// Exec implements interpreter.InterpretableV2.
func (n *inStrings) Exec(f *interpreter.ExecutionFrame) ref.Val {
	a := n.args[0].Exec(f)
	s, ok := a.(types.String)
	if !ok {
		return n.exec2(f, a, n.args[1].Exec(f))
	}
	charge(f, 1+uint64(len(s))/traversalFactor)
	_, found := n.set[string(s)]
	return types.Bool(found)
}

// Eval implements interpreter.Interpretable.
func (n *inStrings) Eval(act interpreter.Activation) ref.Val {
	return n.Exec(interpreter.AsFrame(act))
}
