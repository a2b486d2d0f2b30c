package health

import (
	"fmt"
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
)

// TestResolvedPairsAreBounded: an evaluator remembers the rules of at most maxResolved
// (apiVersion, resource) pairs, however many it is asked about.
func TestResolvedPairsAreBounded(t *testing.T) {
	t.Parallel()
	ev, err := NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
		{APIVersion: "*", Resources: []string{"*"}, RuleExpression: "true"},
	}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxResolved + 100 {
		if n := ev.RulesApplied(fmt.Sprintf("g%d.example.com/v1", i), "things"); n != 1 {
			t.Fatalf("pair %d: %d rules applied, want 1", i, n)
		}
	}
	n := 0
	ev.resolved.Range(func(any, any) bool { n++; return true })
	if n != maxResolved || ev.nResolved.Load() != maxResolved {
		t.Errorf("%d pairs remembered (counted %d), want %d", n, ev.nResolved.Load(), maxResolved)
	}
}

// TestWildcardCostsNothingPerPass: once a pair is resolved, evaluating it with wildcard
// rules selected allocates no more than with the same rules written exactly.
func TestWildcardCostsNothingPerPass(t *testing.T) {
	rules := func(apiVersion, resource string) []extv1alpha1.GlobalHealthRuleSet {
		return []extv1alpha1.GlobalHealthRuleSet{{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
			{APIVersion: apiVersion, Resources: []string{resource}, RuleExpression: "object.status.ready == true"},
		}}}}
	}
	obj := map[string]any{"status": map[string]any{"ready": true}}
	allocs := func(global []extv1alpha1.GlobalHealthRuleSet) float64 {
		ev, err := NewEvaluator(global, nil)
		if err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(200, func() {
			if r := ev.Evaluate("s3.aws.upbound.io/v1beta1", "buckets", obj); r.Outcome != Pass || r.RulesApplied != 1 {
				t.Fatalf("got %+v", r)
			}
		})
	}
	exact := allocs(rules("s3.aws.upbound.io/v1beta1", "buckets"))
	wildcard := allocs(rules("*.upbound.io/*", "*"))
	if wildcard > exact {
		t.Errorf("%.1f allocations per evaluation with a wildcard rule, %.1f with an exact one", wildcard, exact)
	}
}
