package health_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// failingRule is a ConfigMap rule that fails unless data.ready is "true", with the
// message msg and the failedExpression failed ("" for none).
func failingRule(msg, failed string) extv1alpha1.RuleSpec {
	r := configMapRule("object.data.?ready.orValue('') == 'true'", "'"+msg+"'")
	r.FailedExpression = failed
	return r
}

// TestFailedExpression: a failedExpression that returns true makes a failure terminal:
// Degraded at once whatever the deadline, with the rule's message and cause Failed; one
// that returns false leaves an ordinary failure; one that errors or returns a non-bool is
// an evaluation error. It is evaluated only when the ruleExpression returned false.
func TestFailedExpression(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	hour := time.Hour
	crashing := map[string]any{"data": map[string]any{"ready": "false", "reason": "CrashLoopBackOff"}}
	cases := []struct {
		name    string
		failed  string
		object  map[string]any
		outcome health.Outcome
		state   v1alpha1.HealthState
		cause   health.Cause
		message string
	}{
		{"terminal", "object.data.?reason.orValue('') == 'CrashLoopBackOff'", crashing,
			health.Fail, v1alpha1.StateDegraded, health.CauseFailed, "broken"},
		{"not terminal", "object.data.?reason.orValue('') == 'ImagePullBackOff'", crashing,
			health.Fail, v1alpha1.StateProgressing, health.CauseRuleFailed, "broken"},
		{"no failedExpression", "", crashing,
			health.Fail, v1alpha1.StateProgressing, health.CauseRuleFailed, "broken"},
		{"an error in it", "object.data.missing == 'x'", crashing,
			health.Error, v1alpha1.StateUnknown, health.CauseEvaluationError, "evaluation error: failedExpression: no such key: missing"},
		{"not a bool", "dyn(object.data.reason)", crashing,
			health.Error, v1alpha1.StateUnknown, health.CauseEvaluationError, "evaluation error: failedExpression returned string, not bool"},
		{"a passing object: never evaluated", "object.data.missing == 'x'", map[string]any{"data": map[string]any{"ready": "true"}},
			health.Pass, v1alpha1.StateHealthy, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := mustEvaluator(t, failingRule("broken", c.failed))
			r := ev.Evaluate("v1", "configmaps", c.object)
			if r.Outcome != c.outcome || r.Message != c.message {
				t.Fatalf("result %v %q, want %v %q", r.Outcome, r.Message, c.outcome, c.message)
			}
			j := health.Judge(r, nil, &hour, now)
			if j.State != c.state {
				t.Errorf("state %s, want %s (deadline an hour away)", j.State, c.state)
			}
			if got := causeOf(j.DecidedBy); got != c.cause {
				t.Errorf("cause %q, want %q", got, c.cause)
			}
			if c.state == v1alpha1.StateDegraded && (j.FirstUnhealthy == nil || !j.FirstUnhealthy.Equal(now)) {
				t.Errorf("terminal failure: firstUnhealthy %v, want the time of the pass", j.FirstUnhealthy)
			}
			if j := health.Judge(r, nil, nil, now); c.state == v1alpha1.StateDegraded && j.State != v1alpha1.StateDegraded {
				t.Errorf("without a deadline: %s, want Degraded", j.State)
			}
		})
	}
}

// TestFailedExpressionAcrossRules: once an object fails a rule, only rules with a
// failedExpression run after it, to find a terminal failure; the first terminal one
// decides (so a library rule fails fast beside convoy-defaults, which sorts first and has
// none); without one, the first failing rule decides as before.
func TestFailedExpressionAcrossRules(t *testing.T) {
	t.Parallel()
	crashing := map[string]any{"data": map[string]any{"ready": "false", "reason": "CrashLoopBackOff"}}
	terminal := "object.data.reason == 'CrashLoopBackOff'"
	// Sorted by name: "a-defaults" first, then "b-…", then "c-…".
	defaults := globalSet("a-defaults", nil, failingRule("not ready", ""))
	// A rule after the first failure that has no failedExpression never runs: its
	// ruleExpression would be an evaluation error, after a costly comprehension.
	erroring := globalSet("b-erroring", nil, configMapRule("lists.range(3000).all(i, i >= 0) && object.data.missing == 'x'", ""))
	library := globalSet("c-library", nil, failingRule("crash loop", terminal), failingRule("second", terminal))
	cases := []struct {
		name    string
		sets    []extv1alpha1.GlobalHealthRuleSet
		message string
		set     string
		rule    int
		cause   health.Cause
	}{
		{"a later terminal rule decides", []extv1alpha1.GlobalHealthRuleSet{defaults, library}, "crash loop", "c-library", 0, health.CauseFailed},
		{"rules without failedExpression are skipped", []extv1alpha1.GlobalHealthRuleSet{defaults, erroring, library}, "crash loop", "c-library", 0, health.CauseFailed},
		{"no terminal rule: the first failure", []extv1alpha1.GlobalHealthRuleSet{defaults, erroring}, "not ready", "a-defaults", 0, health.CauseRuleFailed},
		{"not terminal: the first failure", []extv1alpha1.GlobalHealthRuleSet{defaults,
			globalSet("c-library", nil, failingRule("pull", "object.data.reason == 'ImagePullBackOff'"))}, "not ready", "a-defaults", 0, health.CauseRuleFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := health.NewEvaluator(c.sets, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, u, err := ev.EvaluateMetered(context.Background(), nil, "v1", "configmaps", crashing)
			if err != nil {
				t.Fatal(err)
			}
			if u.Cost > 1000 {
				t.Errorf("the evaluation cost %d units: a rule without failedExpression ran after the first failure", u.Cost)
			}
			if r.Outcome != health.Fail || r.Message != c.message || r.DecidedBy == nil || r.DecidedBy.Name != c.set ||
				r.DecidedBy.Rule != c.rule || r.DecidedBy.Cause != c.cause || r.Terminal != (c.cause == health.CauseFailed) {
				t.Errorf("result %v %q decided by %+v (terminal %v); want Fail %q by %s rule %d, %s", r.Outcome, r.Message, r.DecidedBy, r.Terminal,
					c.message, c.set, c.rule, c.cause)
			}
		})
	}
}

// TestFailedExpressionCompiles: a failedExpression is parsed, size-checked and
// type-checked like the rule's other expressions; its error names the field.
func TestFailedExpressionCompiles(t *testing.T) {
	t.Parallel()
	_, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, failingRule("x", "object.data.("))}, nil)
	var ce *health.CompileError
	if !errors.As(err, &ce) || ce.Field != health.FieldFailedExpression || ce.RuleIndex != 0 {
		t.Fatalf("NewEvaluator = %v; want a CompileError of failedExpression", err)
	}
	big := strings.Repeat("object.data.a == 'x' || ", 400) + "true"
	err = health.CheckRuleSetSize(health.KindGlobalHealthRuleSet, "", "g", []extv1alpha1.RuleSpec{failingRule("x", big)})
	if !errors.As(err, &ce) || ce.Field != health.FieldFailedExpression || !errors.As(ce.Err, new(*health.SizeError)) {
		t.Fatalf("CheckRuleSetSize = %v; want the failedExpression refused as too large", err)
	}
}

func causeOf(d *health.Decider) health.Cause {
	if d == nil {
		return ""
	}
	return d.Cause
}

// TestFailedExpressionIsBounded: a tenant's failedExpression runs within the same cost
// limit as its ruleExpression: one that would run away ends as an evaluation error
// (Unknown), never a long evaluation or a crash.
func TestFailedExpressionIsBounded(t *testing.T) {
	t.Parallel()
	ev := mustEvaluator(t, failingRule("broken", "lists.range(1000).all(i, lists.range(1000).all(j, lists.range(1000).all(k, i+j+k >= 0)))"))
	r := ev.Evaluate("v1", "configmaps", map[string]any{"data": map[string]any{"ready": "false"}})
	if r.Outcome != health.Error || !strings.Contains(r.Message, "cost limit exceeded") {
		t.Fatalf("a runaway failedExpression: %v %q; want an evaluation error at the cost limit", r.Outcome, r.Message)
	}
}
