package health_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// testdataDir is the repository's fixture folder (testdata/ at its root), so the tests
// need nothing outside a plain clone.
const testdataDir = "../testdata"

// testdataPath returns a path under testdataDir. A missing file fails the test: the
// fixtures are part of what the tests check, so they must never skip silently.
func testdataPath(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{testdataDir}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture %s is missing: %v", p, err)
	}
	return p
}

// defaultsEvaluator compiles health/convoy-defaults.yaml.
func defaultsEvaluator(t testing.TB) *health.Evaluator {
	t.Helper()
	global, local := manifesttest.RuleSets(t, "convoy-defaults.yaml")
	if len(global) != 1 || len(local) != 0 || global[0].Name != "convoy-defaults" {
		t.Fatalf("convoy-defaults.yaml: want one GlobalHealthRuleSet convoy-defaults, got %d global, %d local", len(global), len(local))
	}
	ev, err := health.NewEvaluator(global, local)
	if err != nil {
		t.Fatalf("compiling convoy-defaults.yaml: %v", err)
	}
	return ev
}

// evaluate runs ev on obj, matched as the loop matches an inventory entry: apiVersion
// and the plural lowercase resource of the kind.
func evaluate(ev *health.Evaluator, obj *unstructured.Unstructured) health.Result {
	gvr, _ := meta.UnsafeGuessKindToResource(schema.FromAPIVersionAndKind(obj.GetAPIVersion(), obj.GetKind()))
	return ev.Evaluate(obj.GetAPIVersion(), gvr.Resource, obj.Object)
}

// assertResult compares the outcome and message of a Result.
func assertResult(t *testing.T, got health.Result, outcome health.Outcome, message string) {
	t.Helper()
	if got.Outcome != outcome || got.Message != message {
		t.Errorf("got %v %q (rule set %q, rule %d), want %v %q",
			got.Outcome, got.Message, got.RuleSet, got.RuleIndex, outcome, message)
	}
}

// globalSet builds a GlobalHealthRuleSet with the given rules.
func globalSet(name string, labels map[string]string, rules ...extv1alpha1.RuleSpec) extv1alpha1.GlobalHealthRuleSet {
	s := extv1alpha1.GlobalHealthRuleSet{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: rules}}
	s.Name, s.Labels = name, labels
	return s
}

// localSet builds a HealthRuleSet with the given rules.
func localSet(namespace, name string, labels map[string]string, rules ...extv1alpha1.RuleSpec) extv1alpha1.HealthRuleSet {
	s := extv1alpha1.HealthRuleSet{Spec: extv1alpha1.HealthRuleSetSpec{Rules: rules}}
	s.Namespace, s.Name, s.Labels = namespace, name, labels
	return s
}

// configMapRule is a rule for v1 configmaps.
func configMapRule(ruleExpr, messageExpr string) extv1alpha1.RuleSpec {
	return extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps"},
		RuleExpression: ruleExpr, MessageExpression: messageExpr}
}
