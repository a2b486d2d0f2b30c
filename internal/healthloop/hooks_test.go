package healthloop

import (
	"context"
	"errors"
	"testing"
	"time"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache/fake"
)

// hook is a hook as the controller-manager records it.
type hook struct {
	name, kind, workload string
	createdAt            time.Time
	timeout              string
}

// hooks applies the inventory's hooks as the controller-manager (non-forced).
func (f *fixture) hooks(hs ...hook) {
	f.t.Helper()
	ac := acv1alpha1.ReleaseInventory(f.rel, f.ns)
	for _, h := range hs {
		e := acv1alpha1.HookEntry().WithName(h.name).WithWorkloadKind(h.kind).WithNamespace(f.ns).WithWorkloadName(h.workload).
			WithCreatedAt(metav1.NewTime(h.createdAt))
		if h.timeout != "" {
			e.WithTimeout(h.timeout)
		}
		ac.WithHooks(e)
	}
	must(f.t, env.Client.Apply(f.ctx, ac, client.FieldOwner(cmManager+"-hooks")))
}

func (f *fixture) hookEntry(name string) v1alpha1.HookEntry {
	f.t.Helper()
	for _, h := range f.getInventory().Hooks {
		if h.Name == name {
			return h
		}
	}
	f.t.Fatalf("no hook %s", name)
	return v1alpha1.HookEntry{}
}

func (f *fixture) expectHook(name string, state v1alpha1.HookState, message string) v1alpha1.HookEntry {
	f.t.Helper()
	h := f.hookEntry(name)
	if h.State != state || h.Message != message {
		f.t.Fatalf("hook %s = %s %q, want %s %q", name, h.State, h.Message, state, message)
	}
	if state.IsTerminal() != (h.FinishedAt != nil) {
		f.t.Fatalf("hook %s: state %s with finishedAt %v", name, h.State, h.FinishedAt)
	}
	return h
}

var podSpec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}

// job creates a Job and sets its status as the Job controller would.
func (f *fixture) job(name string, conds ...batchv1.JobCondition) {
	f.t.Helper()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec}}}
	must(f.t, env.Client.Create(f.ctx, j))
	if len(conds) == 0 {
		return
	}
	now := metav1.Now()
	j.Status.StartTime = &now
	j.Status.Conditions = conds
	for _, c := range conds {
		if c.Type == batchv1.JobComplete {
			j.Status.CompletionTime = &now
			j.Status.Succeeded = 1
		}
		if c.Type == batchv1.JobFailed {
			j.Status.Failed = 1
		}
	}
	must(f.t, env.Client.Status().Update(f.ctx, j))
}

// preHook creates the Job "migrate" with conds (as job does) and records it as the hook
// "pre" of the inventory, created at createdAt.
func (f *fixture) preHook(createdAt time.Time, conds ...batchv1.JobCondition) {
	f.t.Helper()
	f.job("migrate", conds...)
	f.hooks(hook{name: "pre", kind: "Job", workload: "migrate", createdAt: createdAt})
}

func cond(t batchv1.JobConditionType, reason, message string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: metav1.Now(), LastTransitionTime: metav1.Now()}
}

// pod creates a Pod with the given status.
func (f *fixture) pod(name string, status corev1.PodStatus) {
	f.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: podSpec}
	must(f.t, env.Client.Create(f.ctx, p))
	p.Status = status
	must(f.t, env.Client.Status().Update(f.ctx, p))
}

func TestHookOutcomes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.job("job-ok", cond("SuccessCriteriaMet", "CompletionsReached", ""), cond(batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods"))
	f.job("job-failed", cond("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"), cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	f.job("job-running")
	f.job("job-slow")
	f.pod("pod-ok", corev1.PodStatus{Phase: corev1.PodSucceeded})
	f.pod("pod-failed", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "main", Image: "busybox", ImageID: "x",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3}},
	}}})
	created := t0.Add(-10 * time.Minute)
	f.hooks(
		hook{name: "job-ok", kind: "Job", workload: "job-ok", createdAt: t0},
		hook{name: "job-failed", kind: "Job", workload: "job-failed", createdAt: t0},
		hook{name: "job-running", kind: "Job", workload: "job-running", createdAt: t0.Add(-time.Minute)},
		hook{name: "job-timeout", kind: "Job", workload: "job-slow", createdAt: created}, // default 10m: exactly now
		hook{name: "job-custom-timeout", kind: "Job", workload: "job-slow", createdAt: t0.Add(-29 * time.Second), timeout: "30s"},
		hook{name: "pod-ok", kind: "Pod", workload: "pod-ok", createdAt: t0},
		hook{name: "pod-failed", kind: "Pod", workload: "pod-failed", createdAt: t0},
		hook{name: "gone", kind: "Pod", workload: "never-created", createdAt: t0},
	)
	res := f.pass()
	f.expectHook("job-ok", v1alpha1.HookSucceeded, "CompletionsReached: Reached expected number of succeeded pods")
	f.expectHook("job-failed", v1alpha1.HookFailed, "BackoffLimitExceeded: Job has reached the specified backoff limit")
	f.expectHook("job-running", v1alpha1.HookRunning, "")
	f.expectHook("job-timeout", v1alpha1.HookFailed, "timed out after 10m")
	f.expectHook("job-custom-timeout", v1alpha1.HookRunning, "")
	f.expectHook("pod-ok", v1alpha1.HookSucceeded, "")
	f.expectHook("pod-failed", v1alpha1.HookFailed, "container main terminated: Error (exit code 3)")
	f.expectHook("gone", v1alpha1.HookFailed, "workload not found")
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want exactly 1 for the batch", n)
	}
	if res.RequeueAfter != 2*time.Second {
		t.Fatalf("re-check with running hooks = %v, want 2s", res.RequeueAfter)
	}
	// One second later the custom timeout is reached, exactly at createdAt + 30s.
	f.clock.Step(time.Second)
	f.pass()
	f.expectHook("job-custom-timeout", v1alpha1.HookFailed, "timed out after 30s")
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("sync requests = %d, want 2", n)
	}
	// A steady pass (job-running still running) sends nothing and writes nothing.
	rv := f.getInventory().ResourceVersion
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("a steady pass sent a sync request (%d)", n)
	}
	if f.getInventory().ResourceVersion != rv {
		t.Fatal("a steady pass wrote the inventory")
	}
}

// failingReader answers every read with a server error.
type failingReader struct{}

func (failingReader) Get(context.Context, schema.GroupVersionResource, string, string) (*unstructured.Unstructured, error) {
	return nil, errors.New("etcdserver: request timed out")
}

// TestHookReadErrorChangesNothing: a read error other than NotFound is logged and
// writes nothing.
func TestHookReadErrorChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.preHook(t0)
	f.pass()
	rv := f.getInventory().ResourceVersion
	f.h.Clusters = fake.New(failingReader{})
	f.clock.Step(time.Hour) // even past the timeout: nothing is decided without a read
	res := f.pass()
	if f.getInventory().ResourceVersion != rv {
		t.Fatal("a read error wrote the inventory")
	}
	f.expectHook("pre", v1alpha1.HookRunning, "")
	if res.RequeueAfter == 0 {
		t.Fatal("a hook that could not be polled is not re-checked")
	}
}

// TestDeletionPollsHooksOnly: with a finalizer holding the Release, the loop polls the
// preDelete hooks, leaves the Healthy condition and the entries untouched, wakes the
// controller when a hook finishes, and stops writing once every hook has finished.
func TestDeletionPollsHooksOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("true")
	f.passHealthy()
	syncs := f.api.syncs.Load()

	rel := f.getRelease()
	rel.Finalizers = []string{"convoy.kumodo.io/finalizer"}
	must(t, env.Client.Update(f.ctx, rel))
	must(t, env.Client.Delete(f.ctx, rel))
	t.Cleanup(func() {
		r := f.getRelease()
		r.Finalizers = nil
		_ = env.Client.Update(context.Background(), r)
	})
	f.job("pre-delete")
	f.hooks(hook{name: "pre-delete", kind: "Job", workload: "pre-delete", createdAt: t0})
	f.configMap("a", "false") // would be Progressing if assessed
	res := f.pass()
	f.expectHook("pre-delete", v1alpha1.HookRunning, "")
	f.expectEntry("a", v1alpha1.StateHealthy, "")
	f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
	if res.RequeueAfter != 2*time.Second {
		t.Fatalf("re-check during deletion = %v, want 2s (the running hook)", res.RequeueAfter)
	}
	if f.api.syncs.Load() != syncs {
		t.Fatal("sync request without a finished hook")
	}
	j := &batchv1.Job{}
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "pre-delete"), j))
	j.Status.StartTime = &metav1.Time{Time: t0}
	j.Status.CompletionTime = &metav1.Time{Time: t0}
	j.Status.Succeeded = 1
	j.Status.Conditions = complete("")
	must(t, env.Client.Status().Update(f.ctx, j))
	res = f.pass()
	f.expectHook("pre-delete", v1alpha1.HookSucceeded, "CompletionsReached")
	if f.api.syncs.Load() != syncs+1 {
		t.Fatal("no sync request when the hook finished")
	}
	if res.RequeueAfter != 0 {
		t.Fatalf("re-check with no running hook = %v", res.RequeueAfter)
	}
	rv := f.getInventory().ResourceVersion
	f.pass()
	f.pass()
	if f.getInventory().ResourceVersion != rv {
		t.Fatal("the loop kept writing the inventory after every hook finished")
	}
	f.expectEntry("a", v1alpha1.StateHealthy, "")
}
