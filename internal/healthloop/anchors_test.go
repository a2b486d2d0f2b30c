package healthloop

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestAnchorsSurviveRestart: firstUnhealthy lives in the inventory, so a new loop
// instance (a restart) keeps the clock of a failing object, and the entry turns Degraded
// exactly when the deadline passes (spec "Anchors", "Per-entry evaluation").
func TestAnchorsSurviveRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(5*time.Minute, 0)
	f.lastAttempted("r1")
	f.configMap("a", "false")
	f.inventory(cm("a", 0, "r1"))
	f.pass()
	e := f.expectEntry("a", v1alpha1.StateProgressing, "ready=false")
	if e.FirstUnhealthy == nil || !e.FirstUnhealthy.Time.Equal(t0) {
		t.Fatalf("firstUnhealthy = %v, want %v", e.FirstUnhealthy, t0)
	}
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)

	// Restart: a fresh controller, one second before the deadline.
	f.h = f.newController()
	f.clock.SetTime(t0.Add(5*time.Minute - time.Second))
	f.pass()
	f.expectEntry("a", v1alpha1.StateProgressing, "ready=false")

	// Exactly at the deadline: Degraded, anchor unchanged.
	f.h = f.newController()
	f.clock.SetTime(t0.Add(5 * time.Minute))
	f.pass()
	e = f.expectEntry("a", v1alpha1.StateDegraded, "ready=false")
	if !e.FirstUnhealthy.Time.Equal(t0) {
		t.Fatalf("anchor moved to %v", e.FirstUnhealthy)
	}
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonDegraded)

	// A new render does not reset the anchor.
	f.lastAttempted("r2")
	f.inventory(cm("a", 0, "r2"))
	f.clock.Step(time.Second)
	f.pass()
	e = f.expectEntry("a", v1alpha1.StateDegraded, "ready=false")
	if !e.FirstUnhealthy.Time.Equal(t0) || e.AssessedRenderRef != "r2" {
		t.Fatalf("after a new render: %+v", e)
	}

	// Unknown keeps the anchor.
	f.configMapRules("erroring", "object.data.missing == 'x'")
	f.pass()
	e = f.entry("a")
	if e.State != v1alpha1.StateUnknown || e.FirstUnhealthy == nil || !e.FirstUnhealthy.Time.Equal(t0) {
		t.Fatalf("Unknown entry: %+v", e)
	}
	f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)

	// Healthy clears it.
	deleteRuleSet(t, f, "erroring")
	f.configMap("a", "true")
	f.pass()
	e = f.expectEntry("a", v1alpha1.StateHealthy, "")
	if e.FirstUnhealthy != nil {
		t.Fatalf("anchor kept on Healthy: %v", e.FirstUnhealthy)
	}
	// And a new failure starts a new clock.
	f.configMap("a", "false")
	f.clock.Step(time.Minute)
	f.pass()
	e = f.expectEntry("a", v1alpha1.StateProgressing, "ready=false")
	if !e.FirstUnhealthy.Time.Equal(f.clock.Now()) {
		t.Fatalf("new anchor = %v, want %v", e.FirstUnhealthy, f.clock.Now())
	}
}

// TestNoDeadlineStaysProgressing: without a deadline a failing object never degrades.
func TestNoDeadlineStaysProgressing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("false")
	f.pass()
	f.clock.Step(1000 * time.Hour)
	f.pass()
	f.expectEntry("a", v1alpha1.StateProgressing, "ready=false")
}
