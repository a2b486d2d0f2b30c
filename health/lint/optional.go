package lint

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/parser"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// The loop reads object as dyn (an unstructured map), so a field that the schema does not
// declare is simply absent on a live object:
//
//   - an optional selection of it (a.?f), or a selection chained after an optional one
//     (a.?b.f, where a.?b is optional), yields none;
//   - has(a.f) is false;
//   - a plain selection a.f fails (no such key) on every object, so the rule is Unknown.
//
// The API server's typing of CRD validation rules rejects all three alike ("undefined
// field"). Lint types object with openProvider, which resolves an undeclared field of a
// schema object as dyn, and then sorts the selections of undeclared fields by the checked
// AST's types (undeclaredSelections): the plain ones are errors, the others are collected
// so that the rule's caller can warn when no resource the rule is checked against
// declares the field (per resource, a rule for several kinds reads fields that some lack
// on purpose). compileFields reads x['f'], x[?'f'] and 'f' in x on a schema object as
// those selections, as they are on a live object.

// openProvider is the DeclTypeProvider of object's type in which every field that a schema
// object does not declare exists and is dyn.
type openProvider struct {
	*apiservercel.DeclTypeProvider
}

// FindStructFieldType returns the declared type of the field, or dyn when typeName is a
// schema object that does not declare it.
func (p *openProvider) FindStructFieldType(typeName, fieldName string) (*types.FieldType, bool) {
	if ft, ok := p.DeclTypeProvider.FindStructFieldType(typeName, fieldName); ok {
		return ft, true
	}
	if d, ok := p.FindDeclType(typeName); ok && d.IsObject() {
		return &types.FieldType{Type: types.DynType}, true
	}
	return nil, false
}

// undeclaredUse is an optional selection or a has() of a field that the schema object
// it selects from does not declare: it always yields none (has(): false) on a live
// object.
type undeclaredUse struct {
	// id is the node's ID in the expression's AST, the same for every resource the
	// expression is checked against.
	id int64
	// text is the selection as written (unparsed); column is 1-based.
	text   string
	column int
	// owner names the schema object (Kind.path) and field the field it lacks.
	owner, field string
	has          bool
}

// String says what the use does without the schema's field, for one resource.
func (u undeclaredUse) String() string {
	return fmt.Sprintf("%s (column %d): %s declares no field '%s': %s", u.text, u.column, u.owner, u.field, u.outcome())
}

// outcome says what the use yields on a live object.
func (u undeclaredUse) outcome() string {
	if u.has {
		return "has() is always false"
	}
	return "the selection always yields none"
}

// undeclaredSelections finds, in a checked expression, every selection of a field that
// its schema object does not declare (see the comment at the top): the plain ones as
// errors (in the API server's words, "undefined field"), the others as uses. parsed is
// the expression as written, for the uses' text.
func undeclaredSelections(checked, parsed *cel.Ast, declared *apiservercel.DeclTypeProvider, gvk schema.GroupVersionKind) ([]string, []undeclaredUse) {
	native := checked.NativeRep()
	var errs []string
	var uses []undeclaredUse
	for _, e := range ast.MatchDescendants(ast.NavigateAST(native), func(e ast.NavigableExpr) bool {
		return e.Kind() == ast.SelectKind || e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.OptSelect
	}) {
		var operand ast.Expr
		var field string
		plain, has := false, false
		if e.Kind() == ast.SelectKind {
			sel := e.AsSelect()
			operand, field, has, plain = sel.Operand(), sel.FieldName(), sel.IsTestOnly(), !sel.IsTestOnly()
		} else {
			args := e.AsCall().Args()
			if len(args) != 2 || args[1].Kind() != ast.LiteralKind {
				continue
			}
			name, ok := args[1].AsLiteral().Value().(string)
			if !ok {
				continue
			}
			operand, field = args[0], name
		}
		t := native.GetType(operand.ID())
		if t.Kind() == types.OpaqueKind && t.TypeName() == "optional_type" && len(t.Parameters()) == 1 {
			t, plain = t.Parameters()[0], false // a selection on an optional is optional
		}
		if t.Kind() != types.StructKind {
			continue
		}
		if _, ok := declared.FindDeclType(t.TypeName()); !ok {
			continue
		}
		if _, ok := declared.FindStructFieldType(t.TypeName(), field); ok {
			continue
		}
		column := native.SourceInfo().GetStartLocation(e.ID()).Column() + 1
		if plain {
			errs = append(errs, fmt.Sprintf("undefined field '%s' (column %d)", field, column))
			continue
		}
		text := field
		if written := nodeByID(parsed, e.ID()); written != nil { // as written, not as compileFields reads it
			if t, err := parser.Unparse(written, parsed.NativeRep().SourceInfo()); err == nil {
				text = t
			}
		}
		uses = append(uses, undeclaredUse{id: e.ID(), text: text, column: column, owner: ownerName(t.TypeName(), gvk), field: field, has: has})
	}
	return errs, uses
}

// ownerName turns the CEL type name of a schema object (typeName's, then the path from
// the root, list items @idx and map values @elem) into Kind.path.
func ownerName(typeName string, gvk schema.GroupVersionKind) string {
	_, path, _ := strings.Cut(typeName, ".")
	if path == "" {
		return gvk.Kind
	}
	return gvk.Kind + "." + strings.NewReplacer(".@idx", "[]", ".@elem", "[*]").Replace(path)
}

// compileFields compiles expr in env, reading the operations that CEL does not define on
// object types as what they are on a live object, where every object of the schema is a
// map:
//
//   - an index with a string key and an `in` test of a string literal as the field
//     selection: x['f'] as x.f, x[?'f'] as x.?f and 'f' in x as has(x.f);
//   - size(x), x.size(), k in x (k not a literal) and a comprehension over x (all,
//     exists, exists_one, map, filter: over the field names) as operations on x read as
//     a map of string to dyn (maps.go).
//
// Only the nodes that fail to type-check as written are read so, and only where the
// reading then type-checks (on a list, x['f'] stays an error) and, for the map reading,
// x is an object of the schema (size() of an int stays an error). It returns the checked
// AST and, for messages, expr as parsed.
func compileFields(env *cel.Env, expr string) (checked, parsed *cel.Ast, iss *cel.Issues) {
	rewrite := map[int64]reading{} // node ID → how it is read
	for {
		parsed, iss = env.Parse(expr)
		if iss.Err() != nil {
			return nil, nil, iss
		}
		p, _ := env.Parse(expr)
		fieldAccesses(p, rewrite)
		checked, iss = env.Check(p)
		if iss.Err() == nil {
			bad := nonObjectMaps(checked, rewrite)
			if len(bad) == 0 {
				return checked, parsed, nil
			}
			for _, id := range bad {
				rewrite[id] = asWritten
			}
			continue
		}
		changed := false
		for _, e := range iss.Errors() {
			if next := nextReading(parsed, e.ExprID, rewrite[e.ExprID]); next != rewrite[e.ExprID] {
				rewrite[e.ExprID], changed = next, true
			}
		}
		if !changed {
			return nil, nil, iss
		}
	}
}

// reading is how compileFields reads a node that fails to type-check as written.
type reading int

const (
	untried   reading = iota // as written, no other reading tried yet
	asField                  // as a field access (asFieldAccess)
	asMap                    // its object operand as a map (mapSite, maps.go)
	asWritten                // every reading failed: the node's error stands
)

// nextReading returns the reading to try for node id of parsed after reading r failed.
func nextReading(parsed *cel.Ast, id int64, r reading) reading {
	if r == untried && asFieldAccess(parsed, id) != nil {
		return asField
	}
	if holder, _ := mapSite(parsed, id); r < asMap && holder != nil {
		return asMap
	}
	return asWritten
}

// fieldAccesses rewrites, in a parsed AST, each node of rewrite read asField or asMap.
func fieldAccesses(parsed *cel.Ast, rewrite map[int64]reading) {
	for id, r := range rewrite {
		switch r {
		case asField:
			if e := nodeByID(parsed, id); e != nil {
				if access := asFieldAccess(parsed, id); access != nil {
					e.SetKindCase(access)
				}
			}
		case asMap:
			readAsMap(parsed, id)
		}
	}
}

// asFieldAccess returns the field access that the index or `in` node id of parsed is on a
// map: x['f'] → x.f, x[?'f'] → x.?f, 'f' in x → has(x.f); nil for any other node.
func asFieldAccess(parsed *cel.Ast, id int64) ast.Expr {
	e := nodeByID(parsed, id)
	if e == nil || e.Kind() != ast.CallKind {
		return nil
	}
	call := e.AsCall()
	args := call.Args()
	if len(args) != 2 || call.IsMemberFunction() {
		return nil
	}
	key := args[1]
	if call.FunctionName() == operators.In {
		key = args[0]
	}
	if key.Kind() != ast.LiteralKind {
		return nil
	}
	field, ok := key.AsLiteral().Value().(string)
	if !ok {
		return nil
	}
	fac := ast.NewExprFactory()
	switch call.FunctionName() {
	case operators.Index:
		return fac.NewSelect(id, args[0], field)
	case operators.OptIndex:
		return fac.NewCall(id, operators.OptSelect, args[0], key)
	case operators.In:
		return fac.NewPresenceTest(id, args[1], field)
	}
	return nil
}

// nodeByID finds the node id of a parsed AST.
func nodeByID(parsed *cel.Ast, id int64) ast.Expr {
	var found ast.Expr
	ast.PreOrderVisit(parsed.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.ID() == id {
			found = e
		}
	}))
	return found
}
