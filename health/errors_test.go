package health_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// TestCompileErrors: any expression that does not compile fails NewEvaluator with a
// *CompileError naming the set, the rule, the expression and CEL's message.
func TestCompileErrors(t *testing.T) {
	t.Parallel()
	good := configMapRule("true", "'ok'")
	cases := []struct {
		name     string
		global   []extv1alpha1.GlobalHealthRuleSet
		local    []extv1alpha1.HealthRuleSet
		want     health.CompileError
		contains []string
	}{{
		name:   "syntax error in ruleExpression",
		global: []extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, good, configMapRule("object.a +", ""))},
		want: health.CompileError{Kind: "GlobalHealthRuleSet", Name: "g", RuleIndex: 1,
			Field: "ruleExpression", Expression: "object.a +"},
		contains: []string{`GlobalHealthRuleSet/g rule 1: ruleExpression "object.a +": `, "Syntax error"},
	}, {
		name:  "undeclared reference",
		local: []extv1alpha1.HealthRuleSet{localSet("demo", "l", nil, configMapRule("self.ready", ""))},
		want: health.CompileError{Kind: "HealthRuleSet", Namespace: "demo", Name: "l", RuleIndex: 0,
			Field: "ruleExpression", Expression: "self.ready"},
		contains: []string{`HealthRuleSet/demo/l rule 0: ruleExpression "self.ready": `, "undeclared reference to 'self'"},
	}, {
		name:   "syntax error in messageExpression",
		global: []extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, configMapRule("true", "'a' +"))},
		want: health.CompileError{Kind: "GlobalHealthRuleSet", Name: "g", RuleIndex: 0,
			Field: "messageExpression", Expression: "'a' +"},
		contains: []string{"Syntax error"},
	}, {
		name:   "empty ruleExpression",
		global: []extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, configMapRule("", ""))},
		want: health.CompileError{Kind: "GlobalHealthRuleSet", Name: "g", RuleIndex: 0,
			Field: "ruleExpression", Expression: ""},
	}, {
		// Sets compile in rule order too: the first bad set by name is reported.
		name: "first bad set in rule order",
		global: []extv1alpha1.GlobalHealthRuleSet{
			globalSet("z", nil, configMapRule("z +", "")), globalSet("m", nil, configMapRule("m +", ""))},
		want: health.CompileError{Kind: "GlobalHealthRuleSet", Name: "m", RuleIndex: 0,
			Field: "ruleExpression", Expression: "m +"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := health.NewEvaluator(tc.global, tc.local)
			if err == nil {
				t.Fatalf("got an evaluator, want an error")
			}
			if ev != nil {
				t.Errorf("got an evaluator along with the error")
			}
			var ce *health.CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *health.CompileError", err, err)
			}
			if ce.Kind != tc.want.Kind || ce.Namespace != tc.want.Namespace || ce.Name != tc.want.Name ||
				ce.RuleIndex != tc.want.RuleIndex || ce.Field != tc.want.Field || ce.Expression != tc.want.Expression {
				t.Errorf("got %+v, want %+v", *ce, tc.want)
			}
			if ce.Err == nil || errors.Unwrap(ce) != ce.Err {
				t.Errorf("Err %v is not unwrapped", ce.Err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not contain %q", err.Error(), s)
				}
			}
		})
	}
}

// TestCostLimit: an expression that would run for hours (8·10⁹ iterations) stops at the
// cost limit (CostLimit units, Kubernetes' per-call limit) with an evaluation error.
func TestCostLimit(t *testing.T) {
	t.Parallel()
	items := make([]any, 2000)
	for i := range items {
		items[i] = int64(i)
	}
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, configMapRule(
		"object.items.all(a, object.items.all(b, object.items.all(c, a + b + c >= 0)))", "'never'"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := ev.Evaluate("v1", "configmaps", map[string]any{"items": items})
	// About a second on a loaded 2-core machine, half a minute under -race; without the
	// limit it would run for hours. The bound only catches a limit that stopped working.
	if elapsed := time.Since(start); elapsed > 2*time.Minute {
		t.Errorf("took %v; the cost limit should have stopped it long before", elapsed)
	}
	t.Logf("stopped by the cost limit after %v", time.Since(start))
	assertResult(t, r, health.Error, "evaluation error: operation cancelled: actual cost limit exceeded")
}

// TestStaticallyWrongTypesAreEvaluationOutcomes: CONTRACT §2 makes a non-bool rule an
// evaluation error (Unknown for that object) and a non-string message the general
// message, so neither fails the compilation of the whole Release's rules.
func TestStaticallyWrongTypesAreEvaluationOutcomes(t *testing.T) {
	t.Parallel()
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{
		globalSet("a", nil, configMapRule("'yes'", "")),
	}, nil)
	if err != nil {
		t.Fatalf("a string-typed ruleExpression failed compilation: %v", err)
	}
	res := ev.Evaluate("v1", "configmaps", map[string]any{})
	if res.Outcome != health.Error || res.Message != "evaluation error: ruleExpression returned string, not bool" {
		t.Fatalf("result = %+v", res)
	}
	ev, err = health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{
		globalSet("b", nil, configMapRule("false", "1 + 1")),
	}, nil)
	if err != nil {
		t.Fatalf("an int-typed messageExpression failed compilation: %v", err)
	}
	res = ev.Evaluate("v1", "configmaps", map[string]any{})
	if res.Outcome != health.Fail || res.Message != "health rule 0 of GlobalHealthRuleSet/b not satisfied" {
		t.Fatalf("result = %+v", res)
	}
}

// TestEvaluateContext: EvaluateContext gives Evaluate's Result while its context is
// live, and stops before the next expression, with the context's error and no Result,
// once it is done.
func TestEvaluateContext(t *testing.T) {
	t.Parallel()
	ev := mustEvaluator(t, configMapRule("true", ""), configMapRule("object.data.x == 'y'", "'x is ' + object.data.x"))
	obj := map[string]any{"data": map[string]any{"x": "z"}}
	r, err := ev.EvaluateContext(context.Background(), "v1", "configmaps", obj)
	if want := ev.Evaluate("v1", "configmaps", obj); err != nil || r.Outcome != want.Outcome || r.Message != want.Message || r.DecidedBy != want.DecidedBy {
		t.Errorf("live context: %+v, %v; want %+v", r, err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r, err := ev.EvaluateContext(ctx, "v1", "configmaps", obj); !errors.Is(err, context.Canceled) || r.DecidedBy != nil {
		t.Errorf("done context: %+v, %v; want no Result and context.Canceled", r, err)
	}
	if r, err := ev.EvaluateContext(ctx, "v1", "secrets", obj); err != nil || r.Outcome != health.Pass {
		t.Errorf("no applicable rule, done context: %+v, %v; want Pass (nothing to run)", r, err)
	}
}
