package health

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// TestAPIVersionTerms: which leading terms of a ruleExpression read only the apiVersion.
func TestAPIVersionTerms(t *testing.T) {
	t.Parallel()
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		expr string
		want int
	}{
		// The generic set's exclusion of built-in kinds.
		{"!dyn(object).apiVersion.contains('.') || dyn(object).apiVersion.contains('.k8s.io/') || dyn(object).?status.?ready.orValue(false) == true", 2},
		{"object.apiVersion == 'v1' || object.status.ready == true", 1},
		{"(object.apiVersion == 'v1' || object.apiVersion.startsWith('apps/')) || object.status.ready == true", 2},
		{"object.?apiVersion.orValue('') == 'v1' || has(object.apiVersion) || object.kind == 'Pod'", 2},
		{"object['apiVersion'] == 'v1' || object.kind == 'Pod'", 0},                    // an index is not read as a select
		{"object.status.ready == true || object.apiVersion == 'v1'", 0},                // not leading: evaluated first
		{"object.apiVersion == 'v1' && object.kind == 'Pod' || object.kind == 'X'", 0}, // the first term reads kind
		{"[object].exists(o, o.apiVersion == 'v1') || object.kind == 'X'", 0},          // a comprehension
		{"object == {} || object.apiVersion == 'v1'", 0},                               // object read whole
		{"type(object.apiVersion) == string || object.kind == 'X'", 1},                 // a type name is a constant
		{"object.apiVersion == 'v1'", 0},                                               // nothing else to skip
		{"object.metadata.apiVersion == 'v1' || object.kind == 'X'", 0},                // another apiVersion field
	}
	for _, tc := range cases {
		_, checked, err := compileChecked(env, tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		terms, err := apiVersionTerms(env, checked)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if len(terms) != tc.want {
			t.Errorf("%s: %d apiVersion terms, want %d", tc.expr, len(terms), tc.want)
		}
	}
}

// TestDecidedRulesAgree: with convoy-defaults, every set of the rule library and the
// generic set selected, every fixture object gets exactly the Result it gets when no
// rule is decided at match time, under its own apiVersion and under others (so the
// wildcard rules meet built-in and custom apiVersions), and with its apiVersion field
// missing or not a string.
func TestDecidedRulesAgree(t *testing.T) {
	t.Parallel()
	var global []extv1alpha1.GlobalHealthRuleSet
	ruleFiles, _ := filepath.Glob("library/*.yaml")
	for _, path := range append(ruleFiles, "convoy-defaults.yaml", "generic.yaml") {
		g, _ := manifesttest.RuleSets(t, path)
		global = append(global, g...)
	}
	decided, err := NewEvaluator(global, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewEvaluator(global, nil)
	if err != nil {
		t.Fatal(err)
	}
	withTerms := 0
	for _, w := range plain.wildcard {
		if len(w.rule.apiVersionTerms) > 0 {
			withTerms++
		}
		w.rule.apiVersionTerms = nil
	}
	if withTerms == 0 {
		t.Fatal("no wildcard rule has apiVersion terms: the generic set's exclusion is no longer decided at match time")
	}

	dirs, _ := filepath.Glob("library/testdata/*")
	objects := manifesttest.DecodableObjects(t, append(dirs, "../testdata/objects", "../testdata/gitops-engine-health")...)
	if len(objects) < 300 {
		t.Fatalf("%d objects: the corpus went missing", len(objects))
	}
	variants := func(obj map[string]any) []map[string]any {
		missing, number := map[string]any{}, map[string]any{}
		for k, v := range obj {
			missing[k], number[k] = v, v
		}
		delete(missing, "apiVersion")
		number["apiVersion"] = int64(1)
		return []map[string]any{obj, missing, number}
	}
	compared, skipped := 0, 0
	for _, obj := range objects {
		own, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		resource := strings.ToLower(kind) + "s"
		for _, apiVersion := range []string{own, "v1", "apps/v1", "example.com/v1", "pkg.crossplane.io/v1"} {
			for _, o := range variants(obj) {
				want := plain.Evaluate(apiVersion, resource, o)
				got := decided.Evaluate(apiVersion, resource, o)
				// The rules decided to pass the object by its apiVersion alone do not
				// count as applied; the full evaluation cannot tell them apart.
				wantApplied := want.RulesApplied
				if v, _ := o["apiVersion"].(string); v == apiVersion {
					wantApplied = decided.RulesApplied(apiVersion, resource)
				}
				if got.RulesApplied != wantApplied {
					t.Errorf("%s %s/%v as %s: decided rulesApplied %d, want %d", kind, own, nameOf(o), apiVersion, got.RulesApplied, wantApplied)
				}
				got.RulesApplied = want.RulesApplied
				if !sameVerdict(got, want) {
					t.Errorf("%s %s/%v as %s: decided %+v %+v, evaluated %+v %+v", kind, own, nameOf(o), apiVersion,
						got, got.DecidedBy, want, want.DecidedBy)
				}
				compared++
			}
		}
		if match := decided.rulesFor(matchKey{own, resource}); match.passes != nil {
			skipped++
		}
	}
	if skipped == 0 {
		t.Error("no object met a rule decided at match time")
	}
	t.Logf("%d evaluations compared, %d objects with a decided rule", compared, skipped)
}

// sameVerdict compares two Results, the rule that decided included.
func sameVerdict(a, b Result) bool {
	if (a.DecidedBy == nil) != (b.DecidedBy == nil) || (a.DecidedBy != nil && *a.DecidedBy != *b.DecidedBy) {
		return false
	}
	a.DecidedBy, b.DecidedBy = nil, nil
	return a == b
}

// TestDecidedRuleCostsNothing: the generic set's rule passes a built-in object without
// an evaluation (nothing charged to the Meter) and does not count as applied; a custom
// resource, or a built-in object whose apiVersion field is not the one it is evaluated
// under, is evaluated.
func TestDecidedRuleCostsNothing(t *testing.T) {
	t.Parallel()
	g, _ := manifesttest.RuleSets(t, "generic.yaml")
	ev, err := NewEvaluator(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "status": map[string]any{
		"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}}
	r, usage, err := ev.EvaluateMetered(context.Background(), nil, "v1", "pods", pod)
	if err != nil || r.Outcome != Pass || r.RulesApplied != 0 || usage.Cost != 0 {
		t.Errorf("built-in Pod: %+v, cost %d, %v; want Pass, 0 rules applied, cost 0", r, usage.Cost, err)
	}
	if n := ev.RulesApplied("v1", "pods"); n != 0 {
		t.Errorf("RulesApplied(v1, pods) = %d, want 0: the generic rule passes built-in kinds unread", n)
	}
	widget := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}}
	r, usage, err = ev.EvaluateMetered(context.Background(), nil, "example.com/v1", "widgets", widget)
	if err != nil || r.Outcome != Fail || r.RulesApplied != 1 || usage.Cost == 0 {
		t.Errorf("custom resource: %+v, cost %d, %v; want Fail, 1 rule applied, a cost", r, usage.Cost, err)
	}
	// Evaluated under v1 but saying example.com/v1: the rule runs and fails it.
	r, usage, err = ev.EvaluateMetered(context.Background(), nil, "v1", "widgets", widget)
	if err != nil || r.Outcome != Fail || usage.Cost == 0 {
		t.Errorf("custom resource evaluated as v1: %+v, cost %d, %v; want Fail, a cost", r, usage.Cost, err)
	}
}

// nameOf is the metadata.name of a fixture object, for messages.
func nameOf(obj map[string]any) any {
	if m, ok := obj["metadata"].(map[string]any); ok {
		return m["name"]
	}
	return nil
}

// TestGenericSetDeletion: under the generic set a custom resource being deleted is not
// Healthy, whatever its status says, and its message says since when; a built-in object
// is still left to the other sets.
func TestGenericSetDeletion(t *testing.T) {
	t.Parallel()
	g, _ := manifesttest.RuleSets(t, "generic.yaml")
	ev, err := NewEvaluator(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	widget := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "status": ready,
		"metadata": map[string]any{"name": "w", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
	if r := ev.Evaluate("example.com/v1", "widgets", widget); r.Outcome != Fail || r.Message != "being deleted since 2026-01-01T00:00:00Z" {
		t.Errorf("deleted Widget: %+v, want Fail being deleted since 2026-01-01T00:00:00Z", r)
	}
	delete(widget["metadata"].(map[string]any), "deletionTimestamp")
	if r := ev.Evaluate("example.com/v1", "widgets", widget); r.Outcome != Pass {
		t.Errorf("Widget: %+v, want Pass", r)
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
	if r := ev.Evaluate("v1", "configmaps", cm); r.Outcome != Pass {
		t.Errorf("deleted ConfigMap: %+v, want Pass (built in: left to convoy-defaults and the library)", r)
	}
}

// TestDecidedRulesBetweenExactRules: a decided wildcard rule, then an exact rule, then
// another wildcard rule, in the evaluator's order. Each rule keeps its own decision: the
// exact rule between them still runs and fails the object, and only the decided rule
// leaves rulesApplied.
func TestDecidedRulesBetweenExactRules(t *testing.T) {
	t.Parallel()
	decidedWildcard := extv1alpha1.RuleSpec{APIVersion: "*", Resources: []string{"deployments"},
		RuleExpression: "object.?apiVersion.orValue('') != 'apps/v1beta2' || object.spec.replicas == 1"}
	exact := extv1alpha1.RuleSpec{APIVersion: "apps/v1", Resources: []string{"deployments"},
		RuleExpression: "object.spec.replicas == 3", MessageExpression: "'want 3 replicas'"}
	undecided := extv1alpha1.RuleSpec{APIVersion: "*", Resources: []string{"deployments"},
		RuleExpression: "object.spec.replicas > 0"}
	set := func(name string, rule extv1alpha1.RuleSpec) extv1alpha1.GlobalHealthRuleSet {
		s := extv1alpha1.GlobalHealthRuleSet{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{rule}}}
		s.Name = name
		return s
	}
	ev, err := NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{set("a", decidedWildcard), set("b", exact), set("c", undecided)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"replicas": int64(2)}}
	r := ev.Evaluate("apps/v1", "deployments", obj)
	if r.Outcome != Fail || r.RuleSet != "GlobalHealthRuleSet/b" || r.Message != "want 3 replicas" || r.RulesApplied != 2 {
		t.Errorf("got %+v, want Fail by b %q with 2 rules applied", r, "want 3 replicas")
	}
	obj["spec"] = map[string]any{"replicas": int64(3)}
	if r := ev.Evaluate("apps/v1", "deployments", obj); r.Outcome != Pass || r.RulesApplied != 2 {
		t.Errorf("got %+v, want Pass with 2 rules applied", r)
	}
}
