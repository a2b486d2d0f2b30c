package health_test

import (
	"errors"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// stored gives a set what the API server gives it: a uid and a generation.
func stored(s extv1alpha1.GlobalHealthRuleSet, uid string, generation int64) extv1alpha1.GlobalHealthRuleSet {
	s.UID, s.Generation, s.ResourceVersion = types.UID(uid), generation, "1"
	return s
}

// TestEvaluatorCacheCompilesOnce: a second pass over the same selection compiles
// nothing and returns the same evaluator; a generation change compiles again and
// drops the old entry; another selection is compiled on its own.
func TestEvaluatorCacheCompilesOnce(t *testing.T) {
	t.Parallel()
	c := health.NewEvaluatorCache(0)
	a := stored(globalSet("a", nil, configMapRule("object.data.x == 'y'", "'not y'")), "uid-a", 1)
	b := stored(globalSet("b", nil, configMapRule("true", "")), "uid-b", 1)
	obj := map[string]any{"data": map[string]any{"x": "z"}}

	ev1, err := c.Get([]extv1alpha1.GlobalHealthRuleSet{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev2, err := c.Get([]extv1alpha1.GlobalHealthRuleSet{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Compiles() != 1 || ev1 != ev2 {
		t.Fatalf("second pass: %d compilations, same evaluator %v; want 1, true", c.Compiles(), ev1 == ev2)
	}
	assertResult(t, ev2.Evaluate("v1", "configmaps", obj), health.Fail, "not y")

	// The set changes: generation 2 with another rule.
	a2 := stored(globalSet("a", nil, configMapRule("object.data.x == 'z'", "")), "uid-a", 2)
	ev3, err := c.Get([]extv1alpha1.GlobalHealthRuleSet{a2, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Compiles() != 2 || ev3 == ev1 {
		t.Fatalf("after a generation change: %d compilations, new evaluator %v; want 2, true", c.Compiles(), ev3 != ev1)
	}
	assertResult(t, ev3.Evaluate("v1", "configmaps", obj), health.Pass, "")
	if c.Len() != 1 {
		t.Errorf("%d entries after the change, want 1 (the old generation dropped)", c.Len())
	}
	// A different selection (b alone) is its own entry.
	if _, err := c.Get([]extv1alpha1.GlobalHealthRuleSet{b}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get([]extv1alpha1.GlobalHealthRuleSet{a2, b}, nil); err != nil {
		t.Fatal(err)
	}
	if c.Compiles() != 3 {
		t.Errorf("%d compilations, want 3", c.Compiles())
	}
}

// TestEvaluatorCacheCompileError: a set that does not compile gives the same
// *CompileError on every pass without compiling again, and compiles once fixed.
func TestEvaluatorCacheCompileError(t *testing.T) {
	t.Parallel()
	c := health.NewEvaluatorCache(0)
	bad := stored(globalSet("bad", nil, configMapRule("object.data.x ==", "")), "uid-bad", 1)
	for range 2 {
		ev, err := c.Get([]extv1alpha1.GlobalHealthRuleSet{bad}, nil)
		var ce *health.CompileError
		if ev != nil || !errors.As(err, &ce) || ce.Name != "bad" {
			t.Fatalf("got %v, %v; want a CompileError for bad", ev, err)
		}
	}
	if c.Compiles() != 1 {
		t.Errorf("%d compilations, want 1", c.Compiles())
	}
	fixed := stored(globalSet("bad", nil, configMapRule("true", "")), "uid-bad", 2)
	if _, err := c.Get([]extv1alpha1.GlobalHealthRuleSet{fixed}, nil); err != nil {
		t.Fatalf("fixed set: %v", err)
	}
}

// TestEvaluatorCacheWithoutGeneration: sets that were never stored (no generation, no
// resourceVersion) are keyed by their rules, so a change is still seen.
func TestEvaluatorCacheWithoutGeneration(t *testing.T) {
	t.Parallel()
	c := health.NewEvaluatorCache(0)
	obj := map[string]any{}
	ev, _ := c.Get([]extv1alpha1.GlobalHealthRuleSet{globalSet("a", nil, configMapRule("false", ""))}, nil)
	assertResult(t, ev.Evaluate("v1", "configmaps", obj), health.Fail, "health rule 0 of GlobalHealthRuleSet/a not satisfied")
	ev, _ = c.Get([]extv1alpha1.GlobalHealthRuleSet{globalSet("a", nil, configMapRule("true", ""))}, nil)
	assertResult(t, ev.Evaluate("v1", "configmaps", obj), health.Pass, "")
	// Only the failedExpression changes: a failure turns terminal.
	rule := configMapRule("false", "")
	ev, _ = c.Get([]extv1alpha1.GlobalHealthRuleSet{globalSet("a", nil, rule)}, nil)
	rule.FailedExpression = "true"
	ev2, _ := c.Get([]extv1alpha1.GlobalHealthRuleSet{globalSet("a", nil, rule)}, nil)
	if ev.Evaluate("v1", "configmaps", obj).Terminal || !ev2.Evaluate("v1", "configmaps", obj).Terminal {
		t.Error("a changed failedExpression is not seen: the cache keyed the set without it")
	}
}

// TestEvaluatorCacheLocalSets: HealthRuleSets of two namespaces with the same name
// are different identities.
func TestEvaluatorCacheLocalSets(t *testing.T) {
	t.Parallel()
	c := health.NewEvaluatorCache(0)
	l1 := localSet("ns1", "l", nil, configMapRule("false", "'ns1'"))
	l2 := localSet("ns2", "l", nil, configMapRule("false", "'ns2'"))
	l1.Generation, l2.Generation = 1, 1
	ev1, _ := c.Get(nil, []extv1alpha1.HealthRuleSet{l1})
	ev2, _ := c.Get(nil, []extv1alpha1.HealthRuleSet{l2})
	assertResult(t, ev1.Evaluate("v1", "configmaps", nil), health.Fail, "ns1")
	assertResult(t, ev2.Evaluate("v1", "configmaps", nil), health.Fail, "ns2")
}

// TestEvaluatorCacheKeyUnambiguous: selections whose names, uids and generations run
// together the same way are different selections.
func TestEvaluatorCacheKeyUnambiguous(t *testing.T) {
	t.Parallel()
	c := health.NewEvaluatorCache(0)
	fails := func(name, uid string, generation int64) extv1alpha1.GlobalHealthRuleSet {
		return stored(globalSet(name, nil, configMapRule("false", "'"+name+"/"+uid+"'")), uid, generation)
	}
	selections := [][]extv1alpha1.GlobalHealthRuleSet{
		{fails("ab", "c", 1)}, {fails("a", "bc", 1)}, {fails("a", "b", 11)}, {fails("a", "b1", 1)},
		{fails("a", "", 1), fails("b", "", 1)}, {fails("a", "b", 1)},
	}
	for i, sel := range selections {
		ev, err := c.Get(sel, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := sel[0].Name + "/" + string(sel[0].UID)
		assertResult(t, ev.Evaluate("v1", "configmaps", nil), health.Fail, want)
		if c.Compiles() != i+1 {
			t.Errorf("selection %d: %d compilations, want %d", i, c.Compiles(), i+1)
		}
	}
}

// TestEvaluatorCacheConcurrentGets: many workers asking at once for a selection that is
// not compiled yet (a cold start) compile it once and all get that evaluator.
func TestEvaluatorCacheConcurrentGets(t *testing.T) {
	t.Parallel()
	c := health.NewEvaluatorCache(0)
	var rules []extv1alpha1.RuleSpec
	for range 200 { // long enough to compile that the workers meet while it runs
		rules = append(rules, configMapRule("object.data.x == 'y' && object.data.exists(k, k.startsWith('a'))", "'not y'"))
	}
	sel := []extv1alpha1.GlobalHealthRuleSet{stored(globalSet("big", nil, rules...), "uid-big", 1)}
	const workers = 16
	got := make([]*health.Evaluator, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ev, err := c.Get(sel, nil)
			if err != nil {
				t.Error(err)
			}
			got[i] = ev
		}()
	}
	close(start)
	wg.Wait()
	if c.Compiles() != 1 {
		t.Errorf("%d compilations for %d concurrent Gets of one selection, want 1", c.Compiles(), workers)
	}
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("worker %d got another evaluator", i)
		}
	}
}
