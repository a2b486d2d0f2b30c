package lint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// uncheckedHas finds has(object.a.b…) whose operand object.a… may be absent (a field on
// the way is not required by the schema) and that no enclosing expression guards: has()
// tests only its last field, so on an object without object.a it is an evaluation error
// (Unknown), not false. An operand is guarded on the right of `P && …`, in the then-branch
// of `P ? … : …` (P holding has() of the operand or of a field below it), on the right of
// `!has(…) || …` and in the else-branch of `!P ? … : …` likewise.
func uncheckedHas(checked *cel.Ast, root *spec.Schema) []string {
	nav := ast.NavigateAST(checked.NativeRep())
	var out []string
	for _, e := range ast.MatchDescendants(nav, ast.KindMatcher(ast.SelectKind)) {
		sel := e.AsSelect()
		if !sel.IsTestOnly() {
			continue
		}
		parent, ok := objectPath(sel.Operand())
		if !ok || len(parent) == 0 || alwaysPresent(root, parent) || guarded(e, parent) {
			continue
		}
		p := "object." + strings.Join(parent, ".")
		out = append(out, fmt.Sprintf("has(%s.%s): %s may be absent, and has() then fails instead of returning false; test has(%s) first (has(%s) && …)",
			p, sel.FieldName(), p, p, p))
	}
	return out
}

// objectPath returns the fields of a plain selection object.f1.f2…; false for anything
// else (an index, an optional selection, a comprehension variable).
func objectPath(e ast.Expr) ([]string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return nil, e.AsIdent() == objectVar
	case ast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			return nil, false
		}
		p, ok := objectPath(s.Operand())
		return append(p, s.FieldName()), ok
	}
	return nil, false
}

// objectVar is the rules' only variable.
const objectVar = "object"

// alwaysPresent reports whether every field of path is required on its way down from
// root.
func alwaysPresent(root *spec.Schema, path []string) bool {
	cur := root
	for _, f := range path {
		if cur == nil || !slices.Contains(cur.Required, f) {
			return false
		}
		next, ok := cur.Properties[f]
		if !ok {
			return false
		}
		cur = &next
	}
	return true
}

// guarded reports whether an enclosing expression of e makes sure that parent exists.
func guarded(e ast.NavigableExpr, parent []string) bool {
	child := e
	for {
		up, ok := child.Parent()
		if !ok {
			return false
		}
		if up.Kind() == ast.CallKind {
			call := up.AsCall()
			args := call.Args()
			at := slices.IndexFunc(args, func(a ast.Expr) bool { return a.ID() == child.ID() })
			var guards [][]string
			switch {
			case call.FunctionName() == operators.LogicalAnd && at == 1,
				call.FunctionName() == operators.Conditional && at == 1:
				guards = tested(args[0], false)
			case call.FunctionName() == operators.LogicalOr && at == 1,
				call.FunctionName() == operators.Conditional && at == 2:
				guards = tested(args[0], true)
			}
			for _, g := range guards {
				if len(g) >= len(parent) && slices.Equal(g[:len(parent)], parent) {
					return true
				}
			}
		}
		child = up
	}
}

// tested returns the paths that are known to exist when e is true (negated: when e is
// false): has(object.p…) gives p plus its field; && (|| when negated) gives both sides.
func tested(e ast.Expr, negated bool) [][]string {
	switch e.Kind() {
	case ast.SelectKind:
		s := e.AsSelect()
		if !s.IsTestOnly() || negated {
			return nil
		}
		p, ok := objectPath(s.Operand())
		if !ok {
			return nil
		}
		return [][]string{append(p, s.FieldName())}
	case ast.CallKind:
		call := e.AsCall()
		switch {
		case call.FunctionName() == operators.LogicalNot:
			return tested(call.Args()[0], !negated)
		case call.FunctionName() == operators.LogicalAnd && !negated,
			call.FunctionName() == operators.LogicalOr && negated:
			return append(tested(call.Args()[0], negated), tested(call.Args()[1], negated)...)
		}
	}
	return nil
}
