package health_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// TestAPIVersionPatterns: every form of a rule's apiVersion against object apiVersions.
func TestAPIVersionPatterns(t *testing.T) {
	t.Parallel()
	objects := []string{"v1", "v2", "apps/v1", "apps/v1beta1", "upbound.io/v1", "s3.aws.upbound.io/v1beta1",
		"ec2.aws.upbound.io/v1", "xupbound.io/v1", "pkg.crossplane.io/v1", "crossplane.io/v1"}
	cases := []struct {
		pattern   string
		misplaced bool
		want      []string
	}{
		{"*", false, objects},
		{"v1", false, []string{"v1"}},
		{"apps/v1", false, []string{"apps/v1"}},
		{"apps/*", false, []string{"apps/v1", "apps/v1beta1"}},
		{"*/v1", false, []string{"v1", "apps/v1", "upbound.io/v1", "ec2.aws.upbound.io/v1", "xupbound.io/v1", "pkg.crossplane.io/v1", "crossplane.io/v1"}},
		{"*/*", false, objects},
		{"*.upbound.io/*", false, []string{"s3.aws.upbound.io/v1beta1", "ec2.aws.upbound.io/v1"}},
		{"*.upbound.io/v1", false, []string{"ec2.aws.upbound.io/v1"}},
		{"*.aws.upbound.io/v1beta1", false, []string{"s3.aws.upbound.io/v1beta1"}},
		{"*.crossplane.io/*", false, []string{"pkg.crossplane.io/v1"}},
		// A "*" anywhere else is compared literally: it matches nothing real.
		{"*.upbound.io", true, nil},
		{"*upbound.io/v1", true, nil},
		{"apps*/v1", true, nil},
		{"apps/v*", true, nil},
		{"*./v1", true, nil},
		{"/*", true, nil},
		{"*/", true, nil},
		{"*/v1/x", true, nil},
	}
	for _, tc := range cases {
		p, misplaced := health.ParseAPIVersionPattern(tc.pattern)
		if misplaced != tc.misplaced {
			t.Errorf("%q: misplaced %v, want %v", tc.pattern, misplaced, tc.misplaced)
		}
		var got []string
		for _, o := range objects {
			if p.Matches(o) {
				got = append(got, o)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q matches %q, want %q", tc.pattern, got, tc.want)
		}
		if misplaced && (p.IsWildcard() || !p.Matches(tc.pattern)) {
			t.Errorf("%q: a misplaced \"*\" must be compared literally", tc.pattern)
		}
	}
}

// TestWildcardMatch: resources "*" and apiVersion patterns select rules in Evaluate;
// RulesApplied counts the rules that apply, each once.
func TestWildcardMatch(t *testing.T) {
	t.Parallel()
	rule := func(apiVersion string, resources ...string) extv1alpha1.RuleSpec {
		return extv1alpha1.RuleSpec{APIVersion: apiVersion, Resources: resources,
			RuleExpression: "false", MessageExpression: fmt.Sprintf("%q", apiVersion+" "+fmt.Sprint(resources))}
	}
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil,
		rule("apps/v1", "*"),
		rule("*.upbound.io/*", "buckets", "*", "buckets"),
		rule("*/v1", "configmaps"),
		rule("*.crossplane.io/v1", "providers"),
		rule("*", "widgets"),
	)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		apiVersion, resource string
		applied              int
		message              string
	}{
		{"apps/v1", "deployments", 1, "apps/v1 [*]"},
		{"apps/v1", "statefulsets", 1, "apps/v1 [*]"},
		{"apps/v1beta1", "deployments", 0, ""},
		{"s3.aws.upbound.io/v1beta1", "buckets", 1, "*.upbound.io/* [buckets * buckets]"},
		{"upbound.io/v1", "buckets", 0, ""},
		{"v1", "configmaps", 1, "*/v1 [configmaps]"},
		{"apps/v1", "configmaps", 2, "apps/v1 [*]"},
		{"pkg.crossplane.io/v1", "providers", 1, "*.crossplane.io/v1 [providers]"},
		{"pkg.crossplane.io/v1beta1", "providers", 0, ""},
		{"crossplane.io/v1", "providers", 0, ""},
		{"v1", "widgets", 1, "* [widgets]"},
		{"example.com/v9", "widgets", 1, "* [widgets]"},
		{"v1", "pods", 0, ""},
	}
	for _, tc := range cases {
		r := ev.Evaluate(tc.apiVersion, tc.resource, map[string]any{})
		if r.RulesApplied != tc.applied || r.Message != tc.message {
			t.Errorf("%s %s: %d rules applied, message %q; want %d, %q", tc.apiVersion, tc.resource, r.RulesApplied, r.Message, tc.applied, tc.message)
		}
		if n := ev.RulesApplied(tc.apiVersion, tc.resource); n != tc.applied {
			t.Errorf("%s %s: RulesApplied %d, want %d", tc.apiVersion, tc.resource, n, tc.applied)
		}
		if (r.Outcome == health.Pass) != (tc.applied == 0) {
			t.Errorf("%s %s: outcome %v with %d rules applied", tc.apiVersion, tc.resource, r.Outcome, tc.applied)
		}
	}
}

// TestRulesAppliedCountsRulesNotReached: RulesApplied counts every rule that applies,
// also those after the deciding one, and those that pass.
func TestRulesAppliedCountsRulesNotReached(t *testing.T) {
	t.Parallel()
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil,
		configMapRule("object.data.a == 'x'", ""),
		configMapRule("true", ""),
		extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps", "configmaps"}, RuleExpression: "true"},
		extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"secrets"}, RuleExpression: "false"},
	)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a       string
		outcome health.Outcome
	}{{"x", health.Pass}, {"y", health.Fail}} {
		r := ev.Evaluate("v1", "configmaps", map[string]any{"data": map[string]any{"a": tc.a}})
		if r.Outcome != tc.outcome || r.RulesApplied != 3 {
			t.Errorf("a=%s: %v with %d rules applied, want %v with 3", tc.a, r.Outcome, r.RulesApplied, tc.outcome)
		}
	}
	if r := ev.Evaluate("v1", "services", nil); r.Outcome != health.Pass || r.RulesApplied != 0 {
		t.Errorf("unjudged object: %v with %d rules applied, want Pass with 0", r.Outcome, r.RulesApplied)
	}
}

// TestWildcardRuleOrder: when exact and wildcard rules both apply they run in the
// contract's order (global sets by name, then local sets by name, each set's rules in
// list order), whatever kind of match selected them. The order is read by letting every
// rule fail and removing the deciding one, one at a time.
func TestWildcardRuleOrder(t *testing.T) {
	t.Parallel()
	rule := func(id, apiVersion string, resources ...string) extv1alpha1.RuleSpec {
		return extv1alpha1.RuleSpec{APIVersion: apiVersion, Resources: resources,
			RuleExpression:    "!object.data.fail.exists(x, x == '" + id + "')",
			MessageExpression: "'" + id + "'"}
	}
	global := []extv1alpha1.GlobalHealthRuleSet{
		globalSet("b", nil, rule("b0", "v1", "configmaps"), rule("b1", "*", "*"), rule("b2", "v1", "configmaps")),
		globalSet("a", nil, rule("a0", "*/v1", "configmaps"), rule("a1", "v1", "configmaps"), rule("a2", "v1", "secrets"),
			rule("a3", "v1", "*"), rule("a4", "apps/*", "*")),
	}
	local := []extv1alpha1.HealthRuleSet{
		localSet("demo", "z", nil, rule("z0", "v1", "configmaps")),
		localSet("demo", "m", nil, rule("m0", "*", "configmaps"), rule("m1", "v1", "configmaps")),
	}
	ev, err := health.NewEvaluator(global, local)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a0", "a1", "a3", "b0", "b1", "b2", "m0", "m1", "z0"}
	// Concurrent first evaluations of the same pair must all see the same order.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := evaluationOrder(ev, "v1", "configmaps", len(want)+1); !slices.Equal(got, want) {
				t.Errorf("order %q, want %q", got, want)
			}
		}()
	}
	wg.Wait()
	if n := ev.RulesApplied("v1", "configmaps"); n != len(want) {
		t.Errorf("RulesApplied %d, want %d", n, len(want))
	}
	if got, want := evaluationOrder(ev, "apps/v1", "deployments", 4), []string{"a4", "b1"}; !slices.Equal(got, want) {
		t.Errorf("apps/v1 deployments: order %q, want %q", got, want)
	}
}

// evaluationOrder returns the ids of the rules that apply, in evaluation order.
func evaluationOrder(ev *health.Evaluator, apiVersion, resource string, limit int) []string {
	all := []any{"a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2", "m0", "m1", "z0"}
	var order []string
	for range limit {
		r := ev.Evaluate(apiVersion, resource, map[string]any{"data": map[string]any{"fail": all}})
		if r.Outcome != health.Fail {
			break
		}
		order = append(order, r.Message)
		all = slices.DeleteFunc(all, func(x any) bool { return x == r.Message })
	}
	return order
}

// TestWildcardManyPairs: an evaluator asked about more pairs than it remembers still
// matches every one of them correctly, concurrently.
func TestWildcardManyPairs(t *testing.T) {
	t.Parallel()
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil,
		extv1alpha1.RuleSpec{APIVersion: "*.example.com/*", Resources: []string{"*"}, RuleExpression: "false"},
		extv1alpha1.RuleSpec{APIVersion: "a.example.com/v1", Resources: []string{"r7"}, RuleExpression: "false"},
	)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				av := fmt.Sprintf("g%d.example.com/v%d", i, w)
				res := fmt.Sprintf("r%d", i%10)
				want := 1
				if i%2 == 0 {
					av = fmt.Sprintf("g%d.other.io/v%d", i, w)
					want = 0
				}
				if n := ev.Evaluate(av, res, nil).RulesApplied; n != want {
					t.Errorf("%s %s: %d rules applied, want %d", av, res, n, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := ev.RulesApplied("a.example.com/v1", "r7"); n != 2 {
		t.Errorf("a.example.com/v1 r7: %d rules applied, want 2", n)
	}
}
