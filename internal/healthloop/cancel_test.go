package healthloop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/clustercache/fake"
	"github.com/kumodo/convoy-observer/internal/controllerkit"
	"github.com/kumodo/convoy-observer/internal/controllerkit/kittest"
)

// TestReleaseDeletedMidPassIsQuiet: a Release deleted after the cache served it makes
// the status write fail with NotFound: an expected race, a quiet retry.
func TestReleaseDeletedMidPassIsQuiet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	stale := f.getRelease()
	must(t, env.Client.Delete(f.ctx, stale))
	f.h.Reader = staleReader{Reader: env.Client, stale: stale}
	if _, err := f.h.syncHandler(f.ctx, f.key); !controllerkit.IsQuiet(err) {
		t.Fatalf("pass = %v, want a quiet error", err)
	}
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

// TestCancelledPassWritesNothing: a pass cut off by shutdown writes nothing
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
			f.preHook(t0)
			f.passHealthy()
			f.expectHook("pre", v1alpha1.HookRunning, "")
			rel, inv, syncs := f.getRelease().ResourceVersion, f.getInventory().ResourceVersion, f.api.syncs.Load()

			ctx, cancel := context.WithCancel(context.Background())
			f.h.Clusters = fake.New(cancellingReader{cancel: cancel, notConnect: notConnect})
			f.h.Writer = detachedWriter{env.Client}
			f.clock.Step(time.Hour) // the hook would time out, the entry would turn Unknown
			// The pass runs in a real controller, on the context that the read cancels
			// (as a shutdown cancels the controller's).
			log, sink := newRecordingLogger()
			f.h.Log = log
			c := kittest.Start(t, func(_ context.Context, key string) (controllerkit.Result, error) { return f.h.syncHandler(ctx, key) }, log)
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
			if !controllerkit.IsQuiet(err) {
				t.Fatalf("a cancelled pass returned %v, want a quiet error", err)
			}
		})
	}
}

// slowReader plays a target that answers each read only when the caller gives up.
type slowReader struct{}

func (slowReader) Get(ctx context.Context, gvr schema.GroupVersionResource, _, name string) (*unstructured.Unstructured, error) {
	<-ctx.Done()
	return nil, fmt.Errorf(`Get "https://127.0.0.1:6443/%s/%s": %w`, gvr.Resource, name, ctx.Err())
}

// TestSlowPassTimesOut: a pass whose target answers too slowly for its inventory stops
// reading at PassTimeout and frees its worker: it returns without an error, its Healthy
// condition says that the pass timed out (Unknown), and the re-check comes back soon.
// (The process's own shutdown is no timeout: TestCancelledPassWritesNothing.)
func TestSlowPassTimesOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.inventory(cm("a", 0, ""))
	f.h.Clusters = &fake.ClusterCache{Reader: slowReader{}}
	f.h.PassTimeout = 200 * time.Millisecond
	res, err := f.h.syncHandler(f.ctx, f.key)
	if err != nil {
		t.Fatalf("a timed-out pass returned %v; want its result written and no error", err)
	}
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if !strings.Contains(c.Message, "--pass-timeout (200ms)") {
		t.Errorf("condition %q; want it to say that the pass timed out", c.Message)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Second {
		t.Errorf("next pass after %v; want a re-check within seconds", res.RequeueAfter)
	}
}

// TestNamespaceHoldsItsShareOfWorkers: with NamespaceWorkers 1, a second pass of a
// namespace whose first pass is still reading ends at once (no read, no write) and comes
// back within seconds, while a pass of another namespace runs; once the first pass is
// done, the namespace's next pass runs.
func TestNamespaceHoldsItsShareOfWorkers(t *testing.T) {
	t.Parallel()
	a, b := newFixture(t), newFixture(t)
	for _, f := range []*fixture{a, b} {
		f.readyRelease(0, 0)
		f.inventory(cm("x", 0, ""))
	}
	reader := &gateReader{gate: make(chan struct{})}
	h := a.h
	h.Clusters = &fake.ClusterCache{Reader: reader}
	h.NamespaceWorkers = 1
	done := make(chan error, 1)
	go func() { _, err := h.syncHandler(a.ctx, a.key); done <- err }()
	eventually(t, "the first pass reading", func() bool { return reader.held() == 1 })

	// A second Release of a's namespace: its pass ends at once.
	a.rel, a.key = "app2", a.ns+"/app2"
	a.release(localRules(0), 0)
	res, err := h.syncHandler(a.ctx, a.key)
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Second || reader.held() != 1 {
		t.Fatalf("a pass over the namespace's share: %+v, %v, %d reads; want an early return that comes back within seconds", res, err, reader.held())
	}
	if c := meta.FindStatusCondition(a.getRelease().Status.Conditions, v1alpha1.ConditionHealthy); c != nil {
		t.Errorf("the throttled pass wrote %+v", c)
	}
	// Another namespace is not held back.
	go func() { _, _ = h.syncHandler(b.ctx, b.key) }()
	eventually(t, "the other namespace's pass reading", func() bool { return reader.held() == 2 })
	close(reader.gate)
	must(t, <-done)
	if _, err := h.syncHandler(a.ctx, a.key); err != nil {
		t.Fatal(err)
	}
	a.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
}
