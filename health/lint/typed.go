package lint

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	celopenapi "k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kumodo/convoy-observer/health"
)

// checkExpression type-checks expr with object of schema s, as a live object is read
// (live.go), and checks its has() calls. It returns the errors, and the optional
// selections and has() of fields that the schema does not declare (optional.go).
func checkExpression(expr string, s *spec.Schema, gvk schema.GroupVersionKind) ([]string, []undeclaredUse) {
	env, declared, err := typedEnv(liveSchema(s, numbersDyn, 0), gvk)
	if err != nil {
		return []string{fmt.Sprintf("cannot build the typed environment: %v", err)}, nil
	}
	ast, parsed, iss := compileFields(env, expr)
	if iss.Err() != nil {
		return issues(iss), nil
	}
	errs, uses := undeclaredSelections(ast, parsed, declared, gvk)
	if len(errs) > 0 {
		return errs, uses
	}
	if intEnv, _, err := typedEnv(liveSchema(s, numbersInt, 0), gvk); err == nil {
		if _, _, iss := compileFields(intEnv, expr); iss.Err() != nil {
			var msgs []string
			for _, m := range issues(iss) {
				msgs = append(msgs, "a JSON number without a fraction is an int on a live object, and then: "+m)
			}
			return msgs, uses
		}
	}
	if msgs := escapedNames(expr); len(msgs) > 0 {
		return msgs, uses
	}
	return uncheckedHas(ast, s), uses
}

// issues lists the messages of a failed compilation.
func issues(iss *cel.Issues) []string {
	var msgs []string
	for _, e := range iss.Errors() {
		msgs = append(msgs, fmt.Sprintf("%s (column %d)", e.Message, e.Location.Column()+1))
	}
	return msgs
}

// typedEnv is the rules' environment with object declared as the resource's type, in
// which a field that a schema object does not declare is dyn (openProvider), and the
// provider that knows the declared fields only.
func typedEnv(s *spec.Schema, gvk schema.GroupVersionKind) (*cel.Env, *apiservercel.DeclTypeProvider, error) {
	decl := common.SchemaDeclType(&celopenapi.Schema{Schema: s}, true)
	if decl == nil {
		return nil, nil, fmt.Errorf("the schema of %s has no CEL type", gvk)
	}
	decl = decl.MaybeAssignTypeName(typeName(gvk))
	base, err := environment.MustBaseEnvSet(health.CompatibilityVersion).Env(environment.StoredExpressions)
	if err != nil {
		return nil, nil, err
	}
	// As the API server's environment declares a DeclType (environment.VersionedOptions).
	declared := apiservercel.NewDeclTypeProvider(decl)
	if health.CompatibilityVersion.AtLeast(version.MajorMinor(1, 31)) {
		declared.SetRecognizeKeywordAsFieldName(true)
	}
	declared, err = declared.WithTypeProvider(base.CELTypeProvider())
	if err != nil {
		return nil, nil, err
	}
	open := &openProvider{declared}
	env, err := base.Extend(cel.Variable("object", decl.CelType()), cel.CustomTypeProvider(open), cel.CustomTypeAdapter(open), fieldsOfDecl)
	return env, declared, err
}

// typeName names the object's CEL type after its kind, for readable errors.
func typeName(gvk schema.GroupVersionKind) string {
	r := strings.NewReplacer(".", "_", "/", "_", "-", "_")
	return "object_" + r.Replace(gvk.Group) + "_" + gvk.Version + "_" + gvk.Kind
}
