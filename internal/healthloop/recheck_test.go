package healthloop

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// TestRecheckJitterIsApplied: the delay of the next pass is stretched by the jitter
// factor, 1 + 0.2 × Rand(), on top of progressBackoff.
func TestRecheckJitterIsApplied(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.h.Rand = func() float64 { return 0.5 }
	f.oneConfigMap("false")
	if d := f.pass().RequeueAfter; d != 2200*time.Millisecond {
		t.Fatalf("first re-check with Rand 0.5 after %v, want 2.2s", d)
	}
	if d := f.pass().RequeueAfter; d != 4400*time.Millisecond {
		t.Fatalf("second re-check with Rand 0.5 after %v, want 4.4s", d)
	}
}

// TestAttemptCountsAreLostAtRestart: the attempt counts live in memory only, so a
// restarted observer (a new loop on the same objects) starts the backoff at 2s again.
func TestAttemptCountsAreLostAtRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("false")
	for _, want := range []time.Duration{2, 4, 8} {
		if d := f.pass().RequeueAfter; d != want*time.Second {
			t.Fatalf("re-check after %v, want %vs", d, int(want))
		}
	}
	f.h = f.newController() // the restart
	if d := f.pass().RequeueAfter; d != 2*time.Second {
		t.Fatalf("first re-check after a restart after %v, want 2s", d)
	}
}

// TestRecheckClearsOnlyTargetsNoLongerPending: when one pending target turns Healthy
// its count is cleared, and the count of a target still pending carries on.
func TestRecheckClearsOnlyTargetsNoLongerPending(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "false")
	f.configMap("b", "false")
	f.inventory(cm("a", 0, ""), cm("b", 0, ""))
	f.pass()
	f.pass()
	f.configMap("a", "true")
	if d := f.pass().RequeueAfter; d != 8*time.Second {
		t.Fatalf("re-check while b stays pending after %v, want 8s (b's third attempt)", d)
	}
	b := f.entry("b")
	counts := f.h.attemptCounts(f.key)
	if len(counts) != 1 || counts[targetObject(inventory.KeyOf(&b).String())] != 3 {
		t.Fatalf("attempt counts = %v, want only b's, at 3", counts)
	}
	f.configMap("a", "false") // a is pending again: its count starts over
	if d := f.pass().RequeueAfter; d != 2*time.Second {
		t.Fatalf("re-check after a turns pending again after %v, want 2s", d)
	}
}

// TestHookWithoutWorkloadNameIsNotPolled: a hook that names no workload is never
// polled: it gets no state, is not pending, and the loop writes nothing for it.
func TestHookWithoutWorkloadNameIsNotPolled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.job("pre", complete("done")...) // a Job of the hook's name is not its workload
	f.hooks(hook{name: "pre", kind: "Job", workload: "", createdAt: t0.Add(-time.Hour)})
	rv := f.getInventory().ResourceVersion
	if d := f.pass().RequeueAfter; d != 0 {
		t.Fatalf("a hook without workloadName is pending: re-check after %v", d)
	}
	if h := f.hookEntry("pre"); h.State != "" || h.FinishedAt != nil {
		t.Fatalf("a hook without workloadName got state %q, finishedAt %v", h.State, h.FinishedAt)
	}
	if got := f.getInventory().ResourceVersion; got != rv {
		t.Fatal("the loop wrote the inventory for a hook without workloadName")
	}
	if n := f.api.syncs.Load(); n != 0 {
		t.Fatalf("%d sync requests for a hook without workloadName", n)
	}
}

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

// attemptCounts returns a copy of key's attempt counts, for tests.
func (h *HealthController) attemptCounts(key string) map[string]int {
	return h.recall(key).attempts
}
