package healthloop

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestObservedGenerationFollowsSpec: a spec change with the same health moves the
// condition's observedGeneration (the steady-state skip compares it).
func TestObservedGenerationFollowsSpec(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("true")
	f.pass()
	rel := f.getRelease()
	rel.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Interval: &metav1.Duration{Duration: time.Minute}}
	must(t, env.Client.Update(f.ctx, rel))
	f.pass()
	if c, gen := f.healthy(), f.getRelease().Generation; c.ObservedGeneration != gen || gen < 2 {
		t.Fatalf("observedGeneration = %d, generation %d", c.ObservedGeneration, gen)
	}
}

// TestTransitionTimeMovesOnlyOnStatusChange: lastTransitionTime stays while the status
// stays (even when the reason changes) and moves to now when the status changes.
func TestTransitionTimeMovesOnlyOnStatusChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(time.Minute, 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, ""))
	f.pass()
	if c := f.healthy(); !c.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("lastTransitionTime = %v, want %v", c.LastTransitionTime, t0)
	}
	f.clock.Step(time.Minute)
	f.configMap("a", "false")
	f.pass()
	moved := t0.Add(time.Minute)
	if c := f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing); !c.LastTransitionTime.Time.Equal(moved) {
		t.Fatalf("lastTransitionTime after True→False = %v, want %v", c.LastTransitionTime, moved)
	}
	f.clock.Step(2 * time.Minute) // past the deadline: Degraded, still False
	f.pass()
	if c := f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonDegraded); !c.LastTransitionTime.Time.Equal(moved) {
		t.Fatalf("lastTransitionTime moved on a reason change: %v", c.LastTransitionTime)
	}
}

// TestConditionMessageIsOneLine: a multi-line rule message is kept in the entry but the
// condition's message is one line.
func TestConditionMessageIsOneLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("first\nsecond")
	f.pass()
	c := f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	if strings.Contains(c.Message, "\n") || !strings.Contains(c.Message, "ready=first second") {
		t.Fatalf("condition message = %q", c.Message)
	}
	f.expectEntry("a", v1alpha1.StateProgressing, "ready=first\nsecond")
}
