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
// on purpose).

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
// errors (in the API server's words, "undefined field"), the others as uses.
func undeclaredSelections(checked *cel.Ast, declared *apiservercel.DeclTypeProvider, gvk schema.GroupVersionKind) ([]string, []undeclaredUse) {
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
		text, err := parser.Unparse(e, native.SourceInfo())
		if err != nil {
			text = field
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
