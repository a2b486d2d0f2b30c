package lint

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
)

// On a live object every object of the schema is a map of string to values, so size(x),
// x.size(), k in x and the comprehensions over x (all, exists, exists_one, map, filter:
// over its field names) work on it, though CEL defines none of them on object types.
// compileFields reads such an operation that fails to type-check as written on x wrapped
// in fieldsOf(x), a function of the lint environment alone typed map(string, dyn): the
// field names are typed as strings, and a value that is no object of the schema (an int,
// a string) is refused by nonObjectMaps, so its error stands.

// fieldsOf is the lint environment's function that reads an object of the schema as the
// map it is on a live object.
const fieldsOf = "convoy.lint.fieldsOf"

// fieldsOfDecl declares fieldsOf for any argument; nonObjectMaps checks the argument's
// type after checking.
var fieldsOfDecl = cel.Function(fieldsOf,
	cel.Overload("convoy_lint_fields_of", []*cel.Type{cel.TypeParamType("T")}, cel.MapType(cel.StringType, cel.DynType)))

// wrapperID is the node ID of the fieldsOf call that readAsMap adds for the operation
// whose failing node is id: outside the parser's IDs, and the same on every parse.
func wrapperID(id int64) int64 { return id | 1<<40 }

// mapSite returns, for the node id of parsed that failed to type-check, the node that
// holds the operation (a call of size or in, or a comprehension) and its operand that
// would be read as a map; nil, nil when id is no such operation. A comprehension's range
// error names the range itself.
func mapSite(parsed *cel.Ast, id int64) (holder, operand ast.Expr) {
	e := nodeByID(parsed, id)
	if e == nil {
		return nil, nil
	}
	if e.Kind() == ast.CallKind {
		call := e.AsCall()
		switch {
		case call.FunctionName() == overloads.Size && call.IsMemberFunction() && len(call.Args()) == 0:
			return e, call.Target()
		case call.FunctionName() == overloads.Size && !call.IsMemberFunction() && len(call.Args()) == 1:
			return e, call.Args()[0]
		case call.FunctionName() == operators.In && len(call.Args()) == 2:
			return e, call.Args()[1]
		}
		return nil, nil
	}
	ast.PreOrderVisit(parsed.NativeRep().Expr(), ast.NewExprVisitor(func(c ast.Expr) {
		if c.Kind() == ast.ComprehensionKind && c.AsComprehension().IterRange().ID() == id {
			holder, operand = c, e
		}
	}))
	return holder, operand
}

// readAsMap rewrites, in parsed, the operation of the failing node id (mapSite) so that
// its operand is read through fieldsOf; the operand keeps its ID.
func readAsMap(parsed *cel.Ast, id int64) {
	holder, operand := mapSite(parsed, id)
	if holder == nil {
		return
	}
	fac := ast.NewExprFactory()
	wrapped := fac.NewCall(wrapperID(id), fieldsOf, fac.CopyExpr(operand))
	switch holder.Kind() {
	case ast.CallKind:
		call := holder.AsCall()
		switch {
		case call.IsMemberFunction():
			holder.SetKindCase(fac.NewMemberCall(holder.ID(), call.FunctionName(), wrapped))
		case call.FunctionName() == operators.In:
			holder.SetKindCase(fac.NewCall(holder.ID(), operators.In, call.Args()[0], wrapped))
		default:
			holder.SetKindCase(fac.NewCall(holder.ID(), call.FunctionName(), wrapped))
		}
	case ast.ComprehensionKind:
		c := holder.AsComprehension()
		holder.SetKindCase(fac.NewComprehensionTwoVar(holder.ID(), wrapped, c.IterVar(), c.IterVar2(), c.AccuVar(),
			c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()))
	}
}

// nonObjectMaps returns the nodes of rewrite read asMap whose operand, in the checked
// AST, is no object of the schema: for them the reading does not hold.
func nonObjectMaps(checked *cel.Ast, rewrite map[int64]reading) []int64 {
	var bad []int64
	for id, r := range rewrite {
		if r != asMap {
			continue
		}
		w := nodeByID(checked, wrapperID(id))
		if w == nil || w.Kind() != ast.CallKind || len(w.AsCall().Args()) != 1 ||
			checked.NativeRep().GetType(w.AsCall().Args()[0].ID()).Kind() != types.StructKind {
			bad = append(bad, id)
		}
	}
	return bad
}
