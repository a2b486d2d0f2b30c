package healthloop

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/controller/base"
)

// These tests close holes that a mutation pass found (issue #10): each fails when the
// named piece of the loop is removed or renamed.

// TestRenderPendingIsRechecked: while the condition is Pending (an entry of another
// render), render-pending is a pending target: the loop re-checks after 2s without any
// event, and the count goes up each pass (spec "Re-check backoff").
func TestRenderPendingIsRechecked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.lastAttempted("r2")
	f.inventory(cm("a", 0, "r1"))
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second} {
		res := f.pass()
		f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonPending)
		if res.RequeueAfter != want {
			t.Fatalf("pass %d: re-check while Pending = %v, want %v", i+1, res.RequeueAfter, want)
		}
		if n := f.h.attemptCounts(f.key)[targetRenderPending]; n != i+1 {
			t.Fatalf("pass %d: render-pending count = %d", i+1, n)
		}
	}
	f.inventory(cm("a", 0, "r2"))
	if res := f.pass(); res.RequeueAfter != 0 {
		t.Fatalf("re-check once the render is current and Healthy = %v, want none", res.RequeueAfter)
	}
}

// TestFieldManagerNames: the observer's writes carry exactly the field managers that the
// spec names (spec "Writes", "Hook polling"); the names are spelled out here, not taken
// from the constants, so a renamed constant fails.
func TestFieldManagerNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, ""))
	f.job("migrate", complete("")...)
	f.hooks(hook{name: "pre", kind: "Job", workload: "migrate", createdAt: t0})
	f.pass()
	owners := func(mfs []metav1.ManagedFieldsEntry) map[string]string {
		m := map[string]string{}
		for _, mf := range mfs {
			if mf.FieldsV1 != nil {
				m[mf.Manager+"/"+mf.Subresource] += string(mf.FieldsV1.Raw)
			}
		}
		return m
	}
	rel := owners(f.getRelease().ManagedFields)
	if s := rel["convoy-health/status"]; !strings.Contains(s, `k:{\"type\":\"Healthy\"}`) || !strings.Contains(s, "f:healthSummary") {
		t.Fatalf("convoy-health does not own the Healthy condition and healthSummary: %v", rel)
	}
	inv := owners(f.getInventory().ManagedFields)
	if s := inv["convoy-health-inventory/"]; !strings.Contains(s, "f:entries") || !strings.Contains(s, "f:state") {
		t.Fatalf("convoy-health-inventory does not own the entries' state: %v", inv)
	}
	if s := inv["convoy-hook-status/"]; !strings.Contains(s, "f:hooks") || !strings.Contains(s, "f:finishedAt") {
		t.Fatalf("convoy-hook-status does not own the hooks' state: %v", inv)
	}
}

// TestRuleSetAndClusterChangesWakeTheLoop: with every entry Healthy and no interval the
// loop has nothing scheduled, so only an event brings a pass: a changed HealthRuleSet, a
// changed GlobalHealthRuleSet, a changed Cluster each turn the Release's condition
// within the bounded wait (CONTRACT §2, "Events that add a key"). It runs alone (not
// parallel, subtests in order): any GlobalHealthRuleSet change by another test enqueues
// every Release and would hide a missing handler.
func TestRuleSetAndClusterChangesWakeTheLoop(t *testing.T) {
	settle := func(t *testing.T, f *fixture) {
		t.Helper()
		f.configMap("a", "true")
		f.inventory(cm("a", 0, ""))
		startManager(t, f)
		eventually(t, "Healthy", func() bool {
			c := f.getRelease().Status.Conditions
			return len(c) == 1 && c[0].Reason == v1alpha1.ReasonHealthy
		})
	}
	reason := func(f *fixture, want string) func() bool {
		return func() bool {
			c := f.getRelease().Status.Conditions
			return len(c) == 1 && c[0].Reason == want
		}
	}
	t.Run("HealthRuleSet", func(t *testing.T) {
		f := newFixture(t)
		f.readyRelease(0, 0)
		settle(t, f)
		rs := &extv1alpha1.HealthRuleSet{}
		must(t, env.Client.Get(f.ctx, clientKey(f.ns, "rules"), rs))
		rs.Spec.Rules[0].RuleExpression = "object.?data.?ready.orValue('') == 'yes'"
		must(t, env.Client.Update(f.ctx, rs))
		eventually(t, "Progressing after the rule set changed", reason(f, v1alpha1.ReasonProgressing))
	})
	t.Run("Cluster", func(t *testing.T) {
		f := newFixture(t)
		f.readyRelease(0, 0)
		settle(t, f)
		cl := &v1alpha1.Cluster{}
		must(t, env.Client.Get(f.ctx, clientKey(f.ns, "target"), cl))
		cl.Spec.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: fmt.Sprintf("missing-%s", f.ns)}
		must(t, env.Client.Update(f.ctx, cl))
		eventually(t, "Unknown after the Cluster changed", reason(f, v1alpha1.ReasonUnknown))
	})
	t.Run("GlobalHealthRuleSet", func(t *testing.T) {
		f := newFixture(t)
		label := map[string]string{"test-global": f.ns}
		grs := &extv1alpha1.GlobalHealthRuleSet{
			ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-global", Labels: label},
			Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{
				APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: readyRule,
			}}},
		}
		must(t, env.Client.Create(f.ctx, grs))
		t.Cleanup(func() { _ = env.Client.Delete(f.ctx, grs) })
		f.release(&v1alpha1.HealthAssessment{GlobalRuleSetSelector: &metav1.LabelSelector{MatchLabels: label}}, 0)
		settle(t, f)
		must(t, env.Client.Get(f.ctx, clientKey("", grs.Name), grs))
		grs.Spec.Rules[0].RuleExpression = "object.?data.?ready.orValue('') == 'yes'"
		must(t, env.Client.Update(f.ctx, grs))
		eventually(t, "Progressing after the global rule set changed", reason(f, v1alpha1.ReasonProgressing))
	})
}

// TestEmptyInventoryNeedsNoCluster: a Release whose inventory has no entries is Healthy
// with 0/0 healthy even when its Cluster is gone: there is nothing to read
// (docs/operations.md, "The Healthy condition").
func TestEmptyInventoryNeedsNoCluster(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.inventory()
	must(t, env.Client.Delete(f.ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "target", Namespace: f.ns}}))
	f.pass()
	if c := f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy); c.Message != "0/0 healthy" {
		t.Fatalf("message = %q", c.Message)
	}
}

// TestObservedGenerationFollowsSpec: a spec change with the same health moves the
// condition's observedGeneration (the steady-state skip compares it).
func TestObservedGenerationFollowsSpec(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, ""))
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
	f.readyRelease(0, 0)
	f.configMap("a", "first\nsecond")
	f.inventory(cm("a", 0, ""))
	f.pass()
	c := f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	if strings.Contains(c.Message, "\n") || !strings.Contains(c.Message, "ready=first second") {
		t.Fatalf("condition message = %q", c.Message)
	}
	f.expectEntry("a", v1alpha1.StateProgressing, "ready=first\nsecond")
}

// TestDroppedHookVanishes: a hook that the controller-manager no longer records vanishes
// after the next pass, although nothing else about the hooks changed.
func TestDroppedHookVanishes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.hooks(hook{name: "a", kind: "Job", workload: "none-a", createdAt: t0.Add(-time.Minute)},
		hook{name: "b", kind: "Job", workload: "none-b", createdAt: t0.Add(-time.Minute)})
	f.pass()
	f.expectHook("b", v1alpha1.HookFailed, "workload not found")
	f.hooks(hook{name: "a", kind: "Job", workload: "none-a", createdAt: t0.Add(-time.Minute)})
	f.pass()
	if hs := f.getInventory().Hooks; len(hs) != 1 || hs[0].Name != "a" {
		t.Fatalf("hooks = %+v, want only a", hs)
	}
}

// TestReleaseDeletedMidPassIsQuiet: a Release deleted after the cache served it makes
// the status write fail with NotFound: an expected race, a quiet retry.
func TestReleaseDeletedMidPassIsQuiet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	stale := f.getRelease()
	must(t, env.Client.Delete(f.ctx, stale))
	f.h.Reader = staleReader{Reader: env.Client, stale: stale}
	if _, err := f.h.syncHandler(f.ctx, f.key); !base.IsQuiet(err) {
		t.Fatalf("pass = %v, want a quiet error", err)
	}
}
