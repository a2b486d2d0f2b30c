package celbound_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/kumodo/convoy-observer/health/celbound"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// plainProgram compiles expr with cel-go alone: the same environment, no guard, no
// fast paths. It is the reference of TestGuardedProgramsAgreeWithCEL.
func plainProgram(t *testing.T, env *cel.Env, expr string) cel.Program {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	return prg
}

// guardedProgram compiles expr in env and plans it with g, as package health does.
func guardedProgram(t *testing.T, env *cel.Env, g *celbound.Guard, expr string) cel.Program {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", expr, iss.Err())
	}
	prg, err := g.Plan(ast.NativeRep())
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return prg
}

// sameResult compares two evaluations: equal values (by CEL equality and type), or
// the same error message.
func sameResult(a ref.Val, aerr error, b ref.Val, berr error) bool {
	if aerr != nil || berr != nil {
		return aerr != nil && berr != nil && aerr.Error() == berr.Error()
	}
	if a.Type() != b.Type() {
		return false
	}
	return types.Equal(a, b) == types.True || (types.IsError(a) && types.IsError(b))
}

// TestGuardedProgramsAgreeWithCEL: on every fixture object and every expression of
// convoy-defaults and the rule library, plus expressions that reach the edges of the
// fast paths (missing keys, nulls, non-map parents, optionals, has() at every depth),
// the guarded programs return exactly what cel-go returns, errors included.
func TestGuardedProgramsAgreeWithCEL(t *testing.T) {
	t.Parallel()
	env := rulesEnv(t)
	g, err := celbound.NewGuard(env, "object")
	if err != nil {
		t.Fatal(err)
	}
	exprs := []string{
		"object", "object.status", "has(object.status)", "has(object.status.phase)", "object.status.phase",
		"has(object.metadata.labels.app)", "object.metadata.labels.app", "object.spec.replicas + 1",
		"object.status.conditions[0].type", "object.?status.?phase.orValue('none')", "has(object.spec.template.spec)",
		"object.spec.template.spec.containers.size()", "object.metadata.name == object.metadata.namespace",
		"object.status.observedGeneration == object.metadata.generation", "object.spec.nothing == null",
		"object.kind + '/' + object.metadata.name", "type(object.spec.replicas) == int", "object.status == object.status",
		"object.spec.replicas > 2.5", "object.status.replicas == 2u", "string(object.metadata.generation)",
		"object.metadata.name.startsWith('a') || object.metadata.name.contains('-')",
		"object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')",
		"object.status.conditions.map(c, c.type).join(',')", "object.metadata.labels['app']",
		"has(object.metadata) && has(object.metadata.name) && object.metadata.name.size() > 0",
		"object.spec.replicas / 0", "object.status.phase.matches('^R')", "int(object.metadata.generation) * 2",
		"object.metadata.annotations.size()", "[object.kind, object.apiVersion] == ['Pod', 'v1']",
		"{'a': object.kind}.a", "object.spec.selector.matchLabels", "sets.contains([object.kind], ['Pod'])",
		// Constant literals built once and `in` a constant list of strings (literal.go).
		"object.kind in ['Pod', 'Deployment', 'Service']", "object.spec.replicas in ['1', 'a']",
		"object.status.phase in ['Running', 'Succeeded']", "object.nothing in ['a']",
		"object.spec.replicas in [1, 2, 3]", "[[1], [2]] == [[1], [2]]", "{'a': [3], 'b': [1, 2]}.b[1] == 2",
		"{'a': 1, 'a': 2}.a", "object.?status.?conditions.orValue([]).size()", "object.status.conditions.exists(c, c.type in ['Ready', 'Available'])",
		"dyn(object.spec.replicas) in ['1', 'a']",
	}
	objects := manifesttest.DecodableObjects(t, "../../testdata/objects", "../../testdata/gitops-engine-health")
	objects = append(objects, map[string]any{}, map[string]any{"status": nil, "spec": "text", "metadata": map[string]any{"name": nil}})
	ruleFiles, _ := filepath.Glob("../library/*.yaml")
	for _, path := range append(ruleFiles, "../convoy-defaults.yaml") {
		g, l := manifesttest.RuleSets(t, path)
		for _, s := range g {
			for _, r := range s.Spec.Rules {
				exprs = append(exprs, r.RuleExpression)
				if r.MessageExpression != "" {
					exprs = append(exprs, r.MessageExpression)
				}
			}
		}
		for _, s := range l {
			for _, r := range s.Spec.Rules {
				exprs = append(exprs, r.RuleExpression)
			}
		}
	}
	if len(exprs) < 60 || len(objects) < 60 {
		t.Fatalf("%d expressions, %d objects: the corpus went missing", len(exprs), len(objects))
	}
	compared := 0
	act := g.NewActivation()
	for _, expr := range exprs {
		plain := plainProgram(t, env, expr)
		guarded := guardedProgram(t, env, g, expr)
		for _, obj := range objects {
			want, _, werr := plain.Eval(map[string]any{"object": obj})
			act.Bind(obj)
			got, gerr := act.Eval(context.Background(), guarded)
			if !sameResult(want, werr, got, gerr) {
				t.Errorf("%s on %v/%v:\n  cel-go  %v %v\n  guarded %v %v", strings.TrimSpace(expr), obj["kind"],
					nameOf(obj), want, werr, got, gerr)
			}
			compared++
		}
	}
	t.Logf("%d evaluations compared", compared)
}

func nameOf(obj map[string]any) any {
	if m, ok := obj["metadata"].(map[string]any); ok {
		return m["name"]
	}
	return nil
}
