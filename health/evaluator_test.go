package health_test

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// TestDaemonSetErrorAbsorption: a DaemonSet just created, with no observedGeneration,
// numberReady 0 and desiredNumberScheduled 1. `status.observedGeneration == ...` errors,
// but `numberReady == desiredNumberScheduled` is false, and CEL's && lets a false operand
// decide over an error: a failure (Progressing), not an evaluation error (Unknown).
func TestDaemonSetErrorAbsorption(t *testing.T) {
	t.Parallel()
	ev := defaultsEvaluator(t)
	ds := map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "agent", "namespace": "demo", "generation": int64(1)},
		"status": map[string]any{
			"currentNumberScheduled": int64(1), "desiredNumberScheduled": int64(1),
			"numberMisscheduled": int64(0), "numberReady": int64(0), "updatedNumberScheduled": int64(1),
		},
	}
	r := ev.Evaluate("apps/v1", "daemonsets", ds)
	assertResult(t, r, health.Fail, "0/1 ready, 1 updated")
	if state, _ := health.DeriveState(r, nil, nil, time.Now()); state != v1alpha1.StateProgressing {
		t.Errorf("state %s, want Progressing", state)
	}
	if r.RuleSet != "GlobalHealthRuleSet/convoy-defaults" || r.RuleIndex != 2 {
		t.Errorf("deciding rule %q %d, want GlobalHealthRuleSet/convoy-defaults 2", r.RuleSet, r.RuleIndex)
	}
}

// TestEvaluateResults covers the Result of one rule set "g" with one rule (index 0) for
// v1 configmaps, or the HealthRuleSet demo/l when local is set.
func TestEvaluateResults(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 3000)
	obj := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "namespace": "demo"},
		"data":     map[string]any{"phase": "Pending", "count": int64(2), "long": long},
	}
	cases := []struct {
		name          string
		rule, message string
		local         bool
		nilObject     bool
		outcome       health.Outcome
		wantMessage   string
	}{
		{name: "true passes", rule: "object.data.phase == 'Pending'", outcome: health.Pass},
		{name: "false gives the message", rule: "object.data.phase == 'Bound'", message: "'phase: ' + object.data.phase",
			outcome: health.Fail, wantMessage: "phase: Pending"},
		{name: "no messageExpression", rule: "false",
			outcome: health.Fail, wantMessage: "health rule 0 of GlobalHealthRuleSet/g not satisfied"},
		{name: "messageExpression errors", rule: "false", message: "object.data.missing",
			outcome: health.Fail, wantMessage: "health rule 0 of GlobalHealthRuleSet/g not satisfied"},
		{name: "messageExpression returns an int", rule: "false", message: "object.data.count",
			outcome: health.Fail, wantMessage: "health rule 0 of GlobalHealthRuleSet/g not satisfied"},
		{name: "messageExpression returns an empty string", rule: "false", message: "''",
			outcome: health.Fail, wantMessage: ""},
		// CONTRACT writes <Kind>/<name>: the namespace stays out of the message.
		{name: "HealthRuleSet general message", rule: "false", local: true,
			outcome: health.Fail, wantMessage: "health rule 0 of HealthRuleSet/l not satisfied"},
		{name: "non-bool result", rule: "object.data.count",
			outcome: health.Error, wantMessage: "evaluation error: ruleExpression returned int, not bool"},
		{name: "null result", rule: "object.data.?nothing.orValue(null)",
			outcome: health.Error, wantMessage: "evaluation error: ruleExpression returned null_type, not bool"},
		{name: "missing key", rule: "object.status.phase == 'Bound'",
			outcome: health.Error, wantMessage: "evaluation error: no such key: status"},
		{name: "has on a missing parent", rule: "has(object.status.phase)",
			outcome: health.Error, wantMessage: "evaluation error: no such key: status"},
		{name: "division by zero", rule: "object.data.count / 0 == 1",
			outcome: health.Error, wantMessage: "evaluation error: division by zero"},
		{name: "optional types", rule: "object.?status.?phase.orValue('') == 'Bound'", message: "'no status'",
			outcome: health.Fail, wantMessage: "no status"},
		{name: "|| absorbs an error", rule: "object.status.ready || object.data.count == 2", outcome: health.Pass},
		{name: "long message is cut", rule: "false", message: "object.data.long",
			outcome: health.Fail, wantMessage: strings.Repeat("é", 1023) + "…"},
		{name: "nil object is {}", rule: "!has(object.data)", nilObject: true, outcome: health.Pass},
		{name: "kubernetes libraries", rule: "quantity('1Gi').isGreaterThan(quantity('1Mi')) && " +
			"'a,b'.split(',').size() == 2 && [1, 2].isSorted() && isURL('https://x') && " +
			"ip('10.0.0.1').family() == 4 && cidr('10.0.0.0/8').containsIP('10.1.2.3') && " +
			"semver('1.2.3').major() == 1 && 'abc'.find('b') == 'b' && sets.contains([1, 2], [1])",
			outcome: health.Pass},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rule := configMapRule(tc.rule, tc.message)
			var ev *health.Evaluator
			var err error
			wantSet := "GlobalHealthRuleSet/g"
			if tc.local {
				ev, err = health.NewEvaluator(nil, []extv1alpha1.HealthRuleSet{localSet("demo", "l", nil, rule)})
				wantSet = "HealthRuleSet/demo/l"
			} else {
				ev, err = health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, rule)}, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			o := obj
			if tc.nilObject {
				o = nil
			}
			r := ev.Evaluate("v1", "configmaps", o)
			assertResult(t, r, tc.outcome, tc.wantMessage)
			if tc.outcome == health.Pass {
				wantSet = ""
			}
			if wantIndex := map[bool]int{true: -1, false: 0}[tc.outcome == health.Pass]; r.RuleSet != wantSet || r.RuleIndex != wantIndex {
				t.Errorf("deciding rule %q %d, want %q %d", r.RuleSet, r.RuleIndex, wantSet, wantIndex)
			}
			if n := utf8.RuneCountInString(r.Message); n > v1alpha1.MaxMessageLength {
				t.Errorf("message has %d runes", n)
			}
		})
	}
}

// TestEvaluateMatch: a rule applies only when apiVersion and one of resources are equal;
// an object that no rule applies to passes.
func TestEvaluateMatch(t *testing.T) {
	t.Parallel()
	rule := extv1alpha1.RuleSpec{APIVersion: "apps/v1", Resources: []string{"deployments", "statefulsets", "deployments"},
		RuleExpression: "false", MessageExpression: "'failed'"}
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, rule)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		apiVersion, resource string
		outcome              health.Outcome
	}{
		{"apps/v1", "deployments", health.Fail},
		{"apps/v1", "statefulsets", health.Fail},
		{"apps/v1", "daemonsets", health.Pass},
		{"apps/v1beta1", "deployments", health.Pass},
		{"v1", "deployments", health.Pass},
		{"apps/v1", "Deployments", health.Pass},
		{"apps/v1", "deployment", health.Pass},
	}
	for _, tc := range cases {
		r := ev.Evaluate(tc.apiVersion, tc.resource, map[string]any{})
		if r.Outcome != tc.outcome {
			t.Errorf("%s %s: got %v, want %v", tc.apiVersion, tc.resource, r.Outcome, tc.outcome)
		}
	}
}

// TestRuleOrder: global sets by name, then local sets by name, each set's rules in list
// order; the first rule that errors or returns false decides. Every rule fails when
// its id is in object.data.fail and errors when it is in object.data.error.
func TestRuleOrder(t *testing.T) {
	t.Parallel()
	rule := func(id string) extv1alpha1.RuleSpec {
		return configMapRule(
			"object.data.error.exists(x, x == '"+id+"') ? object.data.nothing : !object.data.fail.exists(x, x == '"+id+"')",
			"'"+id+"'")
	}
	// Deliberately out of order, as a lister may return them.
	global := []extv1alpha1.GlobalHealthRuleSet{
		globalSet("b", nil, rule("global/b#0")),
		globalSet("a", nil, rule("global/a#0"), rule("global/a#1")),
	}
	local := []extv1alpha1.HealthRuleSet{
		localSet("demo", "c", nil, rule("local/c#0")),
		localSet("demo", "a", nil, rule("local/a#0")),
	}
	globalBefore, localBefore := slices.Clone(global), slices.Clone(local)
	ev, err := health.NewEvaluator(global, local)
	if err != nil {
		t.Fatal(err)
	}
	if global[0].Name != globalBefore[0].Name || local[0].Name != localBefore[0].Name {
		t.Fatal("NewEvaluator reordered its arguments")
	}
	cases := []struct {
		name       string
		fail, errs []any
		outcome    health.Outcome
		message    string
		ruleSet    string
		ruleIndex  int
	}{
		{name: "all pass", outcome: health.Pass, ruleIndex: -1},
		{name: "global a before global b", fail: []any{"global/b#0", "global/a#1"},
			outcome: health.Fail, message: "global/a#1", ruleSet: "GlobalHealthRuleSet/a", ruleIndex: 1},
		{name: "list order within a set", fail: []any{"global/a#1", "global/a#0"},
			outcome: health.Fail, message: "global/a#0", ruleSet: "GlobalHealthRuleSet/a", ruleIndex: 0},
		{name: "global before local", fail: []any{"local/a#0", "global/b#0"},
			outcome: health.Fail, message: "global/b#0", ruleSet: "GlobalHealthRuleSet/b", ruleIndex: 0},
		{name: "local a before local c", fail: []any{"local/c#0", "local/a#0"},
			outcome: health.Fail, message: "local/a#0", ruleSet: "HealthRuleSet/demo/a", ruleIndex: 0},
		{name: "an earlier failure wins over a later error", fail: []any{"global/a#1"}, errs: []any{"global/b#0"},
			outcome: health.Fail, message: "global/a#1", ruleSet: "GlobalHealthRuleSet/a", ruleIndex: 1},
		{name: "an earlier error wins over a later failure", fail: []any{"local/c#0"}, errs: []any{"local/a#0"},
			outcome: health.Error, message: "evaluation error: no such key: nothing", ruleSet: "HealthRuleSet/demo/a", ruleIndex: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obj := map[string]any{"data": map[string]any{"fail": append([]any{}, tc.fail...), "error": append([]any{}, tc.errs...)}}
			r := ev.Evaluate("v1", "configmaps", obj)
			assertResult(t, r, tc.outcome, tc.message)
			if r.RuleSet != tc.ruleSet || r.RuleIndex != tc.ruleIndex {
				t.Errorf("deciding rule %q %d, want %q %d", r.RuleSet, r.RuleIndex, tc.ruleSet, tc.ruleIndex)
			}
		})
	}
}

func TestTruncateMessage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "1/3 available", "1/3 available"},
		{"exactly 1024", strings.Repeat("a", 1024), strings.Repeat("a", 1024)},
		{"1025 is cut", strings.Repeat("a", 1025), strings.Repeat("a", 1023) + "…"},
		{"multi-byte runes are characters", strings.Repeat("é", 1024), strings.Repeat("é", 1024)},
		{"more bytes than 1024 but fewer runes", strings.Repeat("é", 600), strings.Repeat("é", 600)},
		{"multi-byte cut", strings.Repeat("日本", 600), strings.Repeat("日本", 511) + "日…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := health.TruncateMessage(tc.in)
			if got != tc.want {
				t.Errorf("got %d runes %.20q…, want %d runes %.20q…",
					utf8.RuneCountInString(got), got, utf8.RuneCountInString(tc.want), tc.want)
			}
			if n := utf8.RuneCountInString(got); n > 1024 {
				t.Errorf("%d runes", n)
			}
		})
	}
}

// BenchmarkEvaluate: convoy-defaults against a Deployment fixture, failing (which also
// runs the messageExpression) and passing.
func BenchmarkEvaluate(b *testing.B) {
	ev := defaultsEvaluator(b)
	for _, bc := range []struct{ name, path string }{
		{"fail", testdataDir + "/gitops-engine-health/deployment-progressing.yaml"},
		{"pass", testdataDir + "/objects/06-control-deploy-paused-template-changed.yaml"},
	} {
		obj := manifesttest.Object(b, bc.path).Object
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ev.Evaluate("apps/v1", "deployments", obj)
			}
		})
	}
}
