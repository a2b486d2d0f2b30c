package lint_test

import (
	"strings"
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/lint"
)

// TestMapOperationsOnObjects: on a live object every object of the schema is a map, so
// size(), a comprehension (all, exists, exists_one, map, filter, over its field names)
// and `k in x` with any string k work on it, though CEL does not define them on object
// types: lint accepts them, with the field names typed as strings, and evaluation agrees.
// The same operations on a value that is no object (an int, a string) stay errors.
func TestMapOperationsOnObjects(t *testing.T) {
	t.Parallel()
	deployment := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "a", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"replicas": int64(2), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}}}}},
		"status": map[string]any{"replicas": int64(2), "readyReplicas": int64(2)}}
	for _, tc := range []struct {
		expr string
		want string // "" when lint accepts it: a prefix of the first error otherwise
	}{
		{expr: "size(object.metadata) > 0"},
		{expr: "object.metadata.size() > 0"},
		{expr: "size(object.spec.template.spec.containers[0]) == 2"},
		{expr: "object.metadata.exists(k, k == 'labels')"},
		{expr: "object.spec.all(k, k != 'paused')"},
		{expr: "object.status.exists_one(k, k.startsWith('ready'))"},
		{expr: "object.spec.map(k, k).size() == 3 && object.spec.filter(k, k.endsWith('s')).size() == 1"},
		{expr: "object.spec.template.spec.containers.all(c, c.exists(k, k == 'image'))"},
		{expr: "object.status.all(k, k in object.spec || k.startsWith('ready'))"},
		{expr: "object.spec.exists(k, object.?status.?replicas.orValue(0) > 0)"},
		{expr: "size(object.metadata) == object.metadata.name", want: "found no matching overload for '_==_' applied to '(int, string)'"},
		{expr: "object.metadata.exists(k, k == 1)", want: "found no matching overload for '_==_' applied to '(string, int)'"},
		{expr: "object.metadata.exists(k, object.status.readyReplica > 0)", want: "undefined field 'readyReplica'"},
		{expr: "size(object.spec.replicas) == 1", want: "found no matching overload for 'size' applied to '(int)'"},
		{expr: "object.spec.replicas.exists(x, true)", want: "expression of type 'int' cannot be range of a comprehension"},
		{expr: "object.metadata.name.all(x, true)", want: "expression of type 'string' cannot be range of a comprehension"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			rule := extv1alpha1.RuleSpec{APIVersion: "apps/v1", Resources: []string{"deployments"}, RuleExpression: tc.expr}
			set := extv1alpha1.GlobalHealthRuleSet{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{rule}}}
			set.Name = "m"
			findings := lint.Lint([]extv1alpha1.GlobalHealthRuleSet{set}, nil, &lint.Builtin{})
			if tc.want == "" {
				if len(findings) > 0 {
					t.Errorf("findings:\n%s\nwant none", join(findings))
				}
				ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{set}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r := ev.Evaluate("apps/v1", "deployments", deployment); r.Outcome != health.Pass {
					t.Errorf("lint accepts it, but on a live Deployment it is %s: %s", r.Outcome, r.Message)
				}
				return
			}
			want := "error: GlobalHealthRuleSet/m rule 0 ruleExpression: apps/v1 deployments (Deployment): " + tc.want
			if len(findings) == 0 || !strings.HasPrefix(findings[0].String(), want) {
				t.Errorf("findings:\n%s\nwant the first to start with %s", join(findings), want)
			}
		})
	}
}
