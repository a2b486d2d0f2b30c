package healthloop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// costlyReadyRule passes a ConfigMap whose data.ready is "true", after a comprehension
// that costs a good part of CostLimit.
const costlyReadyRule = "lists.range(3000).all(i, i >= 0) && " + readyRule

// TestPassBudget: a pass that spends its evaluation budget leaves the entries it could
// not evaluate Unknown with a message that names the budget, keeps their firstUnhealthy
// and assessedRenderRef, writes the entries it did evaluate, counts the cut and records
// one Event for consecutive cut passes. A pass with budget enough judges them all.
func TestPassBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.configMapRules("costly", costlyReadyRule)
	f.release(localRules(0), 0)
	names := []string{"c0", "c1", "c2", "c3", "c4", "c5"}
	var entries []cmEntry
	for _, n := range names {
		f.configMap(n, "false")
		entries = append(entries, cm(n, 0, "r1"))
	}
	f.inventory(entries...)
	// One evaluation at a time, in entry order, so the cut is deterministic.
	f.h.ReadConcurrency, f.h.Fair.Slots = 1, 1

	// Without a budget every entry is judged: Progressing since t0.
	f.h.Fair.PassBudget = 0
	f.pass()
	for _, n := range names {
		if e := f.entry(n); e.State != v1alpha1.StateProgressing || e.FirstUnhealthy == nil || e.AssessedRenderRef != "r1" {
			t.Fatalf("entry %s before the budget: %s, firstUnhealthy %v, assessed %q", n, e.State, e.FirstUnhealthy, e.AssessedRenderRef)
		}
	}

	// The cost of one entry, as the loop's evaluator charges it.
	ev, err := health.NewEvaluator(nil, []extv1alpha1.HealthRuleSet{{
		ObjectMeta: metav1.ObjectMeta{Name: "costly", Namespace: f.ns},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{
			APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: costlyReadyRule}}},
	}})
	must(t, err)
	_, u, err := ev.EvaluateMetered(context.Background(), nil, "v1", "configmaps", map[string]any{"data": map[string]any{"ready": "true"}})
	must(t, err)
	if u.Cost < 1000 {
		t.Fatalf("one entry costs %d units; the test needs a costly rule", u.Cost)
	}

	// Every object is ready now, and a new render is recorded; the budget fits two and a
	// half entries.
	for _, n := range names {
		f.configMap(n, "true")
	}
	for i := range entries {
		entries[i].renderRef = "r2"
	}
	f.inventory(entries...)
	f.lastAttempted("r2")
	f.clock.Step(time.Minute)
	f.h.Fair.PassBudget = 2*u.Cost + u.Cost/2
	cutsBefore := testutil.ToFloat64(budgetCuts.WithLabelValues(f.ns))
	for range 2 {
		f.pass()
	}
	msg := budgetMessage(f.h.Fair.PassBudget)
	if !strings.Contains(msg, "evaluation budget") || !strings.Contains(msg, "--pass-evaluation-budget") {
		t.Fatalf("message %q does not name the budget", msg)
	}
	for i, n := range names {
		e := f.entry(n)
		if i < 2 {
			if e.State != v1alpha1.StateHealthy || e.FirstUnhealthy != nil || e.AssessedRenderRef != "r2" {
				t.Errorf("evaluated entry %s: %s %q, firstUnhealthy %v, assessed %q; want Healthy at r2", n, e.State, e.Message, e.FirstUnhealthy, e.AssessedRenderRef)
			}
			continue
		}
		if e.State != v1alpha1.StateUnknown || e.Message != msg {
			t.Errorf("entry %s: %s %q; want Unknown %q", n, e.State, e.Message, msg)
		}
		if e.FirstUnhealthy == nil || !e.FirstUnhealthy.Time.Equal(t0) || e.AssessedRenderRef != "r1" {
			t.Errorf("entry %s: firstUnhealthy %v, assessed %q; want them kept (%v, r1)", n, e.FirstUnhealthy, e.AssessedRenderRef, t0)
		}
	}
	if got := testutil.ToFloat64(budgetCuts.WithLabelValues(f.ns)) - cutsBefore; got != 2 {
		t.Errorf("budget cuts counted %v, want 2 (two passes)", got)
	}
	eventually(t, "one EvaluationBudgetExceeded Event", func() bool {
		n := 0
		for _, e := range f.events("Release", f.rel) {
			if strings.HasPrefix(e, EventEvaluationBudgetExceeded+": 4 of 6 entries not evaluated") {
				n++
			}
		}
		return n == 1
	})

	// A pass with budget enough judges every entry again.
	f.h.Fair.PassBudget = DefaultPassBudget
	f.pass()
	for _, n := range names {
		if e := f.entry(n); e.State != v1alpha1.StateHealthy || e.AssessedRenderRef != "r2" {
			t.Errorf("entry %s after the budget was raised: %s %q, assessed %q", n, e.State, e.Message, e.AssessedRenderRef)
		}
	}
	f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
}

// TestBudgetEventSurvivesAFailedWrite: a pass cut by the budget whose entries write
// fails remembers nothing of the cut, so its retry, cut again, still records the
// EvaluationBudgetExceeded Event of that edge.
func TestBudgetEventSurvivesAFailedWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.configMapRules("costly", costlyReadyRule)
	f.release(localRules(0), 0)
	var entries []cmEntry
	for _, n := range []string{"c0", "c1", "c2"} {
		f.configMap(n, "true")
		entries = append(entries, cm(n, 0, "r1"))
	}
	f.inventory(entries...)
	f.h.ReadConcurrency, f.h.Fair.Slots = 1, 1
	f.h.Fair.PassBudget = 1 // less than one entry: every entry is cut
	w := newFaultyWriter(map[string]int{inventory.FieldManagerInventory: 1})
	f.h.Writer = w
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("the pass whose entries write was made to fail returned no error")
	}
	if n := len(f.events("Release", f.rel)); n != 0 {
		t.Fatalf("the failed pass recorded %d Events", n)
	}
	f.pass() // the retry
	if e := f.entry("c2"); e.State != v1alpha1.StateUnknown || !strings.HasPrefix(e.Message, "not evaluated") {
		t.Fatalf("the retried pass did not cut entry c2: %s %q", e.State, e.Message)
	}
	eventually(t, "the EvaluationBudgetExceeded Event of the retried pass", func() bool {
		for _, e := range f.events("Release", f.rel) {
			if strings.HasPrefix(e, EventEvaluationBudgetExceeded+": ") {
				return true
			}
		}
		return false
	})
}
