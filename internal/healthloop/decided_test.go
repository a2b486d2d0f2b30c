package healthloop

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// recorded is "decidedBy=KIND NAMESPACE/NAME RULE CAUSE rulesApplied=N" of an entry as the
// inventory holds it ("-" and "null" for absent fields).
func recorded(e v1alpha1.InventoryEntry) string {
	d, n := "-", "null"
	if e.DecidedBy != nil {
		d = fmt.Sprintf("%s %s/%s %d %s", e.DecidedBy.Kind, e.DecidedBy.Namespace, e.DecidedBy.Name, e.DecidedBy.Rule, e.DecidedBy.Cause)
	}
	if e.RulesApplied != nil {
		n = fmt.Sprint(*e.RulesApplied)
	}
	return "decidedBy=" + d + " rulesApplied=" + n
}

// TestEntriesRecordDecidedBy: the entries write records, on every assessed entry, how
// many selected rules match it, and on an entry a rule decided, that rule and its cause
// (RuleFailed while Progressing, DeadlinePassed once Degraded); decidedBy goes when the
// entry turns Healthy, and an entry no rule decides (its object is missing) has none.
// convoy-api's /health reads exactly these fields.
func TestEntriesRecordDecidedBy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	must(t, env.Client.Create(f.ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rules", Namespace: f.ns},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
			{APIVersion: "v1", Resources: []string{"services"}, RuleExpression: "true"},
			{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: readyRule},
		}},
	}))
	f.release(localRules(5*time.Minute), 0)
	f.configMap("a", "false")
	f.secret("s", map[string][]byte{"k": []byte("v")})
	f.inventory(cm("a", 0, ""), cm("gone", 0, ""), cmEntry{version: "v1", kind: "Secret", resource: "secrets", name: "s"})
	expect := func(when string, want map[string]string) {
		t.Helper()
		for name, w := range want {
			if got := recorded(f.entry(name)); got != w {
				t.Errorf("%s: %s: %s, want %s", when, name, got, w)
			}
		}
	}

	f.pass()
	if e := f.entry("a"); e.State != v1alpha1.StateProgressing {
		t.Fatalf("a is %s (%s), want Progressing", e.State, e.Message)
	}
	expect("failing", map[string]string{
		"a":    "decidedBy=HealthRuleSet " + f.ns + "/rules 1 RuleFailed rulesApplied=1",
		"gone": "decidedBy=- rulesApplied=1",
		"s":    "decidedBy=- rulesApplied=0",
	})

	f.clock.Step(6 * time.Minute)
	f.pass()
	if e := f.entry("a"); e.State != v1alpha1.StateDegraded {
		t.Fatalf("a is %s (%s), want Degraded", e.State, e.Message)
	}
	expect("past the deadline", map[string]string{"a": "decidedBy=HealthRuleSet " + f.ns + "/rules 1 DeadlinePassed rulesApplied=1"})

	f.configMap("a", "true")
	f.pass()
	f.expectEntry("a", v1alpha1.StateHealthy, "")
	expect("healthy", map[string]string{"a": "decidedBy=- rulesApplied=1"})
}

// TestEntriesWithoutRecordedDecisionAreRewritten: an entry whose state, message, anchor
// and render are current but that lacks decidedBy or rulesApplied (an observer that did
// not record them wrote it) is written again by the next pass, even of a new process
// (no memory of its own last write).
func TestEntriesWithoutRecordedDecisionAreRewritten(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "false")
	f.configMap("b", "true")
	f.inventory(cm("a", 0, "r1"), cm("b", 0, "r1"))
	f.pass()
	a, b := f.entry("a"), f.entry("b")
	if a.DecidedBy == nil || a.FirstUnhealthy == nil || b.RulesApplied == nil {
		t.Fatalf("first pass: a %s, b %s", recorded(a), recorded(b))
	}
	// As an older observer would have written them: the same values, without the new fields.
	ac := acv1alpha1.ReleaseInventory(f.rel, f.ns).WithEntries(
		acv1alpha1.InventoryEntry().WithGroup("").WithKind("ConfigMap").WithNamespace(f.ns).WithName("a").
			WithState(a.State).WithMessage(a.Message).WithFirstUnhealthy(*a.FirstUnhealthy).WithAssessedRenderRef("r1").
			WithRulesApplied(*a.RulesApplied),
		acv1alpha1.InventoryEntry().WithGroup("").WithKind("ConfigMap").WithNamespace(f.ns).WithName("b").
			WithState(b.State).WithAssessedRenderRef("r1"))
	must(t, env.Client.Apply(f.ctx, ac, client.FieldOwner(inventory.FieldManagerInventory), client.ForceOwnership))
	if a, b := f.entry("a"), f.entry("b"); a.DecidedBy != nil || b.RulesApplied != nil {
		t.Fatalf("the old observer's write kept a %s, b %s", recorded(a), recorded(b))
	}

	f.h = f.newController()
	f.pass()
	want := "decidedBy=HealthRuleSet " + f.ns + "/rules 0 RuleFailed rulesApplied=1"
	if got := recorded(f.entry("a")); got != want {
		t.Errorf("a: %s, want %s", got, want)
	}
	if got := recorded(f.entry("b")); got != "decidedBy=- rulesApplied=1" {
		t.Errorf("b: %s, want rulesApplied=1", got)
	}
}
