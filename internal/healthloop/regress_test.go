package healthloop

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/controller/base"
	"github.com/kumodo/convoy-observer/internal/controller/base/basetest"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

func (f *fixture) deleteJob(name string) {
	f.t.Helper()
	must(f.t, env.Client.Delete(f.ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

// TestFinishedHookNeverRegresses (issue #10): a hook that finished in the second it was
// armed keeps Succeeded when its Job is deleted afterwards (delete-on-success), even past
// its timeout, and sends no second sync request; only a re-arm with a newer createdAt
// changes its state again.
func TestFinishedHookNeverRegresses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.job("migrate", complete("done")...)
	f.hooks(hook{name: "pre", kind: "Job", workload: "migrate", createdAt: t0})
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

// cancellingReader plays a target whose reads are cut off by the shutdown of the
// observer: the read cancels the pass's context and fails as client-go does then.
type cancellingReader struct {
	cancel     context.CancelFunc
	notConnect bool
}

func (r cancellingReader) Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	r.cancel()
	<-ctx.Done()
	err := fmt.Errorf(`Get "https://127.0.0.1:6443/%s/%s": %w`, gvr.Resource, name, ctx.Err())
	if r.notConnect {
		return nil, fmt.Errorf("%w: Cluster t/target: %w", clustercache.ErrClusterNotConnected, err)
	}
	return nil, err
}

// detachedWriter completes its writes although the pass's context is cancelled, as a
// request already on the wire at shutdown does: the pass itself must not write.
type detachedWriter struct{ client.Client }

func (w detachedWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return w.Client.Apply(context.WithoutCancel(ctx), obj, opts...)
}

func (w detachedWriter) Status() client.SubResourceWriter { return detachedStatus{w.Client.Status()} }

type detachedStatus struct{ client.SubResourceWriter }

func (s detachedStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return s.SubResourceWriter.Apply(context.WithoutCancel(ctx), obj, opts...)
}

// TestCancelledPassWritesNothing (issue #10): a pass cut off by shutdown writes nothing
// (no Healthy=Unknown, no "cannot read object" entry, no hook state), sends nothing, and
// says nothing at error level; the queue gets a quiet error.
func TestCancelledPassWritesNothing(t *testing.T) {
	t.Parallel()
	for _, notConnect := range []bool{false, true} {
		t.Run(fmt.Sprintf("clusterNotConnected=%v", notConnect), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.readyRelease(time.Minute, 0)
			f.configMap("a", "true")
			f.inventory(cm("a", 0, ""))
			f.job("migrate")
			f.hooks(hook{name: "pre", kind: "Job", workload: "migrate", createdAt: t0})
			f.pass()
			f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
			f.expectHook("pre", v1alpha1.HookRunning, "")
			rel, inv, syncs := f.getRelease().ResourceVersion, f.getInventory().ResourceVersion, f.api.syncs.Load()

			ctx, cancel := context.WithCancel(context.Background())
			f.h.Clusters = fakeClusters{cancellingReader{cancel: cancel, notConnect: notConnect}}
			f.h.Writer = detachedWriter{env.Client}
			f.clock.Step(time.Hour) // the hook would time out, the entry would turn Unknown
			// The pass runs in a real controller, on the context that the read cancels
			// (as a shutdown cancels the controller's).
			log, sink := newRecordingLogger()
			f.h.Log = log
			c := basetest.Start(t, func(_ context.Context, key string) (base.Result, error) { return f.h.syncHandler(ctx, key) }, log)
			c.Enqueue(f.key)
			if out := c.Step(t); out.Err != nil || !out.Result.Requeue { //nolint:staticcheck // the quiet retry
				t.Fatalf("a cancelled pass gave the controller %+v, want a rate-limited requeue without an error", out)
			}
			if lines := sink.errorLines(); len(lines) != 0 {
				t.Fatalf("a cancelled pass logged at error level: %q", lines)
			}
			if f.getRelease().ResourceVersion != rel || f.getInventory().ResourceVersion != inv || f.api.syncs.Load() != syncs {
				t.Fatal("a cancelled pass wrote the Release or the inventory, or sent a sync request")
			}
			f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
			_, err := f.h.syncHandler(ctx, f.key)
			if !base.IsQuiet(err) {
				t.Fatalf("a cancelled pass returned %v, want a quiet error", err)
			}
		})
	}
}

// TestOwedSyncSurvivesRestart (found by test/faults, kill): an observer that dies after
// persisting an edge's state (a completed wave, a finished hook) and before its sync
// request succeeded leaves the debt in the inventory; the next process pays it, once,
// and the process after that reads the record as paid.
func TestOwedSyncSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, write := range []string{"entries", "hooks"} { // a completed wave, a finished hook
		t.Run(write, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.edge(write)
			f.unpaidPass()
			if f.getInventory().Annotations[inventory.AnnotationSyncOwed] == "" {
				t.Fatal("the owed sync request is not recorded in the inventory")
			}
			f.h = f.newController() // a new process: nothing in memory
			f.pass()
			if n := f.api.syncs.Load(); n != 1 {
				t.Fatalf("sync requests after the restart = %d, want 1", n)
			}
			inv := f.getInventory()
			f.pass()
			f.h = f.newController()
			f.pass()
			if f.api.syncs.Load() != 1 || f.getInventory().ResourceVersion != inv.ResourceVersion {
				t.Fatal("a steady pass after paying the debt sent a request or wrote the inventory")
			}
		})
	}
}
