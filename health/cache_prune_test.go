package health

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
)

// TestEvaluatorCacheForgetsGoneSets: the cache remembers the generation of a rule set
// only while a cached selection uses it. A tenant that creates and deletes HealthRuleSets
// (a new uid each time) selected by one of its Releases leaves at most the sets of the
// cached selections behind, not one record per set ever seen; and a new generation of a
// remembered set still replaces its stale evaluator.
func TestEvaluatorCacheForgetsGoneSets(t *testing.T) {
	t.Parallel()
	c := NewEvaluatorCache(0)
	set := func(i int, gen int64, rule string) extv1alpha1.HealthRuleSet {
		return extv1alpha1.HealthRuleSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("s-%d", i),
			UID: types.UID(fmt.Sprintf("uid-%d", i)), Generation: gen},
			Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: rule}}}}
	}
	const n = 3 * DefaultCacheSize
	for i := range n {
		if _, err := c.Get(nil, []extv1alpha1.HealthRuleSet{set(i, 1, "true")}); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	gens, cached := len(c.generations), c.entries.Len()
	c.mu.Unlock()
	if gens > cached {
		t.Errorf("after %d sets created and gone: %d generations kept for %d cached selections", n, gens, cached)
	}
	// The last set, edited: the new generation gives a new evaluator.
	ev, _ := c.Get(nil, []extv1alpha1.HealthRuleSet{set(n-1, 2, "false")})
	if r := ev.Evaluate("v1", "configmaps", map[string]any{}); r.Outcome != Fail {
		t.Errorf("generation 2 of a set: %v, want the new rule's Fail", r.Outcome)
	}
}
