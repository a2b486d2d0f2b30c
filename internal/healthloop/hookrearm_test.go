package healthloop

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

func (f *fixture) deleteJob(name string) {
	f.t.Helper()
	must(f.t, env.Client.Delete(f.ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

// TestFinishedHookNeverRegresses: a hook that finished in the second it was
// armed keeps Succeeded when its Job is deleted afterwards (delete-on-success), even past
// its timeout, and sends no second sync request; only a re-arm with a newer createdAt
// changes its state again.
func TestFinishedHookNeverRegresses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.preHook(t0, complete("done")...)
	f.pass()
	done := f.expectHook("pre", v1alpha1.HookSucceeded, "CompletionsReached: done")
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want 1", n)
	}
	f.deleteJob("migrate")
	rv := f.getInventory().ResourceVersion
	for _, step := range []time.Duration{2 * time.Second, 11 * time.Minute} { // the second pass is past the 10m timeout
		f.clock.Step(step)
		f.pass()
		h := f.expectHook("pre", v1alpha1.HookSucceeded, "CompletionsReached: done")
		if !h.FinishedAt.Equal(done.FinishedAt) {
			t.Fatalf("finishedAt moved from %v to %v", done.FinishedAt, h.FinishedAt)
		}
		if n := f.api.syncs.Load(); n != 1 {
			t.Fatalf("a finished hook whose Job was deleted sent sync request %d", n)
		}
		if f.getInventory().ResourceVersion != rv {
			t.Fatal("a finished hook whose Job was deleted was written again")
		}
	}
	// Re-armed in a later second: the new workload decides.
	f.job("migrate-2", cond("FailureTarget", "BackoffLimitExceeded", "limit"), cond(batchv1.JobFailed, "BackoffLimitExceeded", "limit"))
	f.hooks(hook{name: "pre", kind: "Job", workload: "migrate-2", createdAt: f.clock.Now()})
	f.pass()
	f.expectHook("pre", v1alpha1.HookFailed, "BackoffLimitExceeded: limit")
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("sync requests after the re-armed hook finished = %d, want 2", n)
	}
	// Re-armed once more, and its workload is gone before the first poll: that arming's
	// outcome is "workload not found".
	f.clock.Step(5 * time.Second)
	f.hooks(hook{name: "pre", kind: "Job", workload: "never-created", createdAt: f.clock.Now()})
	f.pass()
	f.expectHook("pre", v1alpha1.HookFailed, "workload not found")
}

// TestHookWorkloadDeletedByTTL: a Running Job that disappears is Failed "workload not
// found" on the next poll.
func TestHookWorkloadDeletedByTTL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.preHook(t0)
	f.pass()
	f.expectHook("pre", v1alpha1.HookRunning, "")
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: f.ns}}
	must(t, env.Client.Delete(f.ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	f.pass()
	f.expectHook("pre", v1alpha1.HookFailed, "workload not found")
}

// TestHookReArmed: a finished hook whose createdAt moves after its finishedAt is polled
// again and returns to Running; an untouched finished hook is not polled but is still
// sent by writeHookStatus.
func TestHookReArmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.job("a", complete("")...)
	f.job("b", complete("")...)
	armed := t0.Add(-time.Minute)
	f.hooks(hook{name: "a", kind: "Job", workload: "a", createdAt: armed}, hook{name: "b", kind: "Job", workload: "b", createdAt: armed})
	f.pass()
	f.expectHook("a", v1alpha1.HookSucceeded, "CompletionsReached")
	f.expectHook("b", v1alpha1.HookSucceeded, "CompletionsReached")

	// The controller-manager re-arms a: a new Job, createdAt after finishedAt.
	must(t, env.Client.Delete(f.ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: f.ns}}, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	f.job("a2")
	// b's Job vanishes: if b were polled again it would turn Failed.
	must(t, env.Client.Delete(f.ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: f.ns}}, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	f.clock.Step(time.Minute)
	f.hooks(hook{name: "a", kind: "Job", workload: "a2", createdAt: f.clock.Now()}, hook{name: "b", kind: "Job", workload: "b", createdAt: armed})
	f.pass()
	f.expectHook("a", v1alpha1.HookRunning, "")
	f.expectHook("b", v1alpha1.HookSucceeded, "CompletionsReached")
}

// TestHookReArmedWithinTheSecond: createdAt and finishedAt are stored to the second; a
// hook re-armed in the same second as it finished is still polled again.
func TestHookReArmedWithinTheSecond(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.job("j1", complete("done")...)
	f.hooks(hook{name: "h", kind: "Job", workload: "j1", createdAt: t0.Add(-5 * time.Second)})
	f.pass()
	f.expectHook("h", v1alpha1.HookSucceeded, "CompletionsReached: done")
	syncs := f.api.syncs.Load()
	f.clock.Step(400 * time.Millisecond)
	f.job("j2")
	f.hooks(hook{name: "h", kind: "Job", workload: "j2", createdAt: f.clock.Now()})
	f.pass()
	f.expectHook("h", v1alpha1.HookRunning, "")
	if f.api.syncs.Load() != syncs {
		t.Fatal("a hook turning Running sent a sync request")
	}
}

// TestHookFinishedInTheSecondItWasArmed: a hook that finishes in the second it was armed
// is polled once more (it may have been re-armed within that second: at most one extra
// sync request), and then left alone.
func TestHookFinishedInTheSecondItWasArmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.hooks(hook{name: "h", kind: "Pod", workload: "never-created", createdAt: t0})
	f.pass()
	f.expectHook("h", v1alpha1.HookFailed, "workload not found")
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want 1", n)
	}
	f.clock.Step(2 * time.Second)
	f.pass() // same second as createdAt: polled again, same result, finishedAt moves on
	if n := f.api.syncs.Load(); n > 2 {
		t.Fatalf("sync requests = %d after the ambiguous second, want at most 2", n)
	}
	syncs := f.api.syncs.Load()
	rv := f.getInventory().ResourceVersion
	f.pass()
	f.pass()
	if f.getInventory().ResourceVersion != rv || f.api.syncs.Load() != syncs {
		t.Fatal("a finished hook kept being written or kept waking the controller")
	}
}

// TestHookReArmedWithinTheSecondAndDone: a hook re-armed in the second it finished, whose
// new workload is already complete, still wakes the controller-manager.
func TestHookReArmedWithinTheSecondAndDone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.job("j1", complete("done")...)
	f.hooks(hook{name: "h", kind: "Job", workload: "j1", createdAt: t0.Add(-5 * time.Second)})
	f.clock.Step(1500 * time.Millisecond)
	f.pass()
	syncs := f.api.syncs.Load()
	f.job("j2", complete("done")...)
	f.hooks(hook{name: "h", kind: "Job", workload: "j2", createdAt: t0.Add(1800 * time.Millisecond)})
	f.clock.Step(1500 * time.Millisecond)
	f.pass()
	if f.api.syncs.Load() != syncs+1 {
		t.Fatal("a re-armed hook that finished sent no sync request")
	}
}
