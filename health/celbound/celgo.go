package celbound

import (
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// Everything the bound knows about cel-go beyond its public contract is in this file.
//
// cel-go's public cost facilities charge a call after it has returned (CostTracking,
// CostLimit) and interrupt only between comprehension iterations (InterruptCheckFrequency
// with ContextEval, which Activation.Eval uses with a context). A call whose work
// outgrows its arguments must be charged before it runs, so the guard (guard.go) replaces
// call nodes through cel-go's public decorator hook and must then call the
// implementation itself. That, and two shortcuts, lean on how cel-go v0.29 builds its
// nodes:
//
//   - dispatch1, dispatch2 and callN call an overload the way cel-go's evalUnary,
//     evalBinary and evalVarArgs do (operand trait check, receiver types, error labels);
//   - isTestOnlyNode recognizes the node of has() by its printed type name (fastattr.go
//     answers has(object.a.b) without cel-go's attribute machinery);
//   - isConcatList recognizes the lazy list of list + list by its reflected type (its
//     Value() would copy the whole list just to size it).
//
// How an upgrade of cel-go is checked: change go.mod, run `go test ./health/celbound/`.
// TestCelGoCouplings fails, naming the coupling, when the version differs from
// checkedCelGoVersion, when has() is planned as another type, or when list + list returns
// another type; then compare dispatch1/dispatch2/callN with evalUnary, evalBinary and
// evalVarArgs of cel-go's package interpreter, run the differential test (guarded and
// plain cel-go agree on every rule of the library and the test cases) and the bounds
// tests, and raise checkedCelGoVersion.

// checkedCelGoVersion is the cel-go release these couplings were last checked against.
const checkedCelGoVersion = "v0.29.2"

// testOnlyNodeType is the printed type of cel-go's has() node.
const testOnlyNodeType = "*interpreter.evalTestOnly"

// isTestOnlyNode reports whether i is cel-go's has() node.
func isTestOnlyNode(i interpreter.Interpretable) bool {
	return reflect.TypeOf(i).String() == testOnlyNodeType
}

// concatListType is the type of the lazy list that CEL's list + list returns.
var concatListType = reflect.TypeOf(types.NewStringList(types.DefaultTypeAdapter, []string{"a"}).(traits.Adder).Add(types.NewStringList(types.DefaultTypeAdapter, []string{"b"})))

// isConcatList reports whether v is the lazy list of a list + list.
func isConcatList(v ref.Val) bool { return reflect.TypeOf(v) == concatListType }

// accepts reports whether the implementation takes a first argument like a (cel-go's
// operand trait check).
func (g *guardedCall) accepts(a ref.Val) bool {
	return g.impl.OperandTrait == 0 || a.Type().HasTrait(g.impl.OperandTrait)
}

// dispatch1 calls a one-argument overload like cel-go's evalUnary.
func (g *guardedCall) dispatch1(a ref.Val) ref.Val {
	if g.impl != nil && g.impl.Unary != nil && g.accepts(a) {
		return types.LabelErrNode(g.id, g.impl.Unary(a))
	}
	return g.callN([]ref.Val{a})
}

// dispatch2 calls a two-argument overload like cel-go's evalBinary.
func (g *guardedCall) dispatch2(a, b ref.Val) ref.Val {
	if g.impl != nil && g.impl.Binary != nil && g.accepts(a) {
		return types.LabelErrNode(g.id, g.impl.Binary(a, b))
	}
	return g.callN([]ref.Val{a, b})
}

// callN calls the variadic implementation, or the receiver, like cel-go's evalVarArgs.
func (g *guardedCall) callN(vals []ref.Val) ref.Val {
	if len(vals) == 0 {
		if g.impl != nil && g.impl.Function != nil {
			return types.LabelErrNode(g.id, g.impl.Function())
		}
		return types.NewErrWithNodeID(g.id, "no such overload: %s", g.function)
	}
	if g.impl != nil && g.impl.Function != nil && g.accepts(vals[0]) {
		return types.LabelErrNode(g.id, g.impl.Function(vals...))
	}
	if vals[0].Type().HasTrait(traits.ReceiverType) {
		return types.LabelErrNode(g.id, vals[0].(traits.Receiver).Receive(g.function, g.overload, vals[1:]))
	}
	return types.NewErrWithNodeID(g.id, "no such overload: %s", g.function)
}
