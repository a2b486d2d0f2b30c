package celbound_test

import (
	"sort"
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// The bound is made for the rules engine: most tests here run it as package health
// installs it, through health.NewEvaluator, on the functions of the rules' environment.

// costExceeded is the message of an evaluation stopped by its budget.
const costExceeded = "evaluation error: operation cancelled: actual cost limit exceeded"

// rulesEnv is the CEL environment of health rules, built as package health builds it
// (health/env.go): Kubernetes' base environment at health.CompatibilityVersion with one
// dyn variable, object.
func rulesEnv(t testing.TB) *cel.Env {
	t.Helper()
	set, err := environment.MustBaseEnvSet(health.CompatibilityVersion).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable("object", cel.DynType)},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// exposedFunctions lists the name of every function of the rules' CEL environment, for
// the audit test of functions_test.go.
func exposedFunctions(t testing.TB) []string {
	var names []string
	for name := range rulesEnv(t).Functions() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
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

// configMapRule is a rule for v1 configmaps.
func configMapRule(ruleExpr, messageExpr string) extv1alpha1.RuleSpec {
	return extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps"},
		RuleExpression: ruleExpr, MessageExpression: messageExpr}
}

// mustEvaluator compiles one global set "g" with the given rules.
func mustEvaluator(t testing.TB, rules ...extv1alpha1.RuleSpec) *health.Evaluator {
	t.Helper()
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, rules...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
