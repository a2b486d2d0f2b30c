package healthloop

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// failingApply fails every top-level apply (the inventory writes) and passes status
// applies through.
type failingApply struct{ client.Client }

func (failingApply) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errors.New("injected: etcdserver: leader changed")
}

// TestFailedInventoryWriteIsRetried: a failed write of the observer's own fields fails
// the pass (the queue retries it) and does not turn the Release Unknown.
func TestFailedInventoryWriteIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("true")
	f.passHealthy()
	f.configMap("a", "false")
	f.h.Writer = failingApply{env.Client}
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("a failed inventory write did not fail the pass")
	}
	f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy) // unchanged, not Unknown
	f.h.Writer = env.Client
	f.pass()
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
}

// TestWriteNeverRecreatesADeletedInventory: an apply built from an inventory read
// before the controller-manager deleted it fails instead of creating an orphan.
func TestWriteNeverRecreatesADeletedInventory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("false")
	f.hooks(hook{name: "pre", kind: "Job", workload: "missing", createdAt: t0})
	stale := f.getInventory()
	must(t, env.Client.Delete(f.ctx, stale))
	a := &assessment{inv: stale, entries: []itemResult{{
		entry: stale.Entries[0], key: inventory.KeyOf(&stale.Entries[0]), state: v1alpha1.StateProgressing, message: "x",
	}}}
	if _, err := f.h.writeInventoryHealth(f.ctx, a, stale.ResourceVersion, ""); err == nil {
		t.Fatal("the entry write succeeded on a deleted inventory")
	}
	after := stale.Hooks[0]
	after.State = v1alpha1.HookRunning
	own, err := inventory.ReadOwnership(stale)
	must(t, err)
	status := hookOutcome{status: hookStatus(own, stale.Hooks, []v1alpha1.HookEntry{after}, false)}
	if _, err := f.h.writeHookStatus(f.ctx, stale, stale.ResourceVersion, status, ""); err == nil {
		t.Fatal("the hook write succeeded on a deleted inventory")
	}
	err = env.Client.Get(f.ctx, clientKey(f.ns, f.rel), &v1alpha1.ReleaseInventory{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the inventory was re-created: %v", err)
	}
}

// staleReader serves a fixed, old copy of one object (a Release or a ReleaseInventory)
// for every Get of that object's type, as a lagging cache would; other reads go through.
type staleReader struct {
	client.Reader
	stale client.Object
}

func (r staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if reflect.TypeOf(obj) == reflect.TypeOf(r.stale) {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(r.stale.DeepCopyObject()).Elem())
		return nil
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestStaleCacheNeverRevivesADroppedEntry: a pass that read the inventory before the
// controller-manager dropped an entry fails with a conflict instead of bringing the
// entry back; the next pass, on fresh data, succeeds.
func TestStaleCacheNeverRevivesADroppedEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.configMap("b", "true")
	f.inventory(cm("a", 0, ""), cm("b", 0, ""))
	stale := f.getInventory()
	f.inventory(cm("a", 0, "")) // b dropped before the observer ever wrote it
	f.h.Reader = staleReader{Reader: env.Client, stale: stale}
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("a pass on a stale inventory wrote it")
	}
	if es := f.getInventory().Entries; len(es) != 1 || es[0].Name != "a" {
		t.Fatalf("entries = %+v, want only a", es)
	}
	f.h.Reader = env.Client
	f.pass()
	f.expectEntry("a", v1alpha1.StateHealthy, "")
}

// TestConditionWrittenThoughTheCacheLags (found by make bench-scale at 10,000
// Releases): a pass that runs before the cache shows the condition that the previous
// pass wrote still writes the condition when it differs from that write, although it
// equals the lagging cache; and the transition time is that of the change.
func TestConditionWrittenThoughTheCacheLags(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.passHealthy()
	lagging := f.getRelease() // Healthy, as the cache keeps showing it
	f.clock.Step(time.Minute)
	f.configMap("a", "false")
	f.pass()
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	f.clock.Step(time.Minute)
	f.configMap("a", "true")
	f.h.Reader = staleReader{Reader: env.Client, stale: lagging}
	f.pass()
	c := f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
	if want := f.clock.Now().UTC().Truncate(time.Second); !c.LastTransitionTime.Time.Equal(want) {
		t.Fatalf("lastTransitionTime = %s, want %s (the change back to True)", c.LastTransitionTime, want)
	}
}

// TestEntriesWrittenThoughTheCacheLags: the same for the entries. A pass whose
// inventory cache does not show the previous pass's apply yet, and equals the state it
// computes, does not skip the apply as unchanged (the inventory holds that apply): the
// apply fails its resourceVersion precondition, and the retry on a fresh cache lands it.
func TestEntriesWrittenThoughTheCacheLags(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.pass()
	lagging := f.getInventory() // a: Healthy, as the cache keeps showing it
	f.configMap("a", "false")
	f.pass()
	f.configMap("a", "true")
	f.h.Reader = staleReader{Reader: env.Client, stale: lagging}
	_, err := f.h.syncHandler(f.ctx, f.key)
	if got := f.entry("a").State; err == nil && got != v1alpha1.StateHealthy {
		t.Fatalf("a pass ended without error, and entry a stays %s", got)
	}
	f.h.Reader = env.Client // the cache caught up
	f.pass()
	f.expectEntry("a", v1alpha1.StateHealthy, "")
}

// TestTooLargeFromTypedCauses: a write is too large on a 413, or on a 500 that carries
// etcd's own error (its constant, as etcd defines it) or gRPC's refusal of a message
// larger than its limit (what the API server answers for an inventory of 4000 entries);
// the same words in any other error are not.
func TestTooLargeFromTypedCauses(t *testing.T) {
	t.Parallel()
	if etcdRequestTooLarge != rpctypes.ErrRequestTooLarge.Error() {
		t.Fatalf("etcdRequestTooLarge = %q, etcd says %q", etcdRequestTooLarge, rpctypes.ErrRequestTooLarge.Error())
	}
	inv := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "releaseinventories"}
	cases := []struct {
		err  error
		want bool
	}{
		{apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		{fmt.Errorf("applying: %w", apierrors.NewInternalError(errors.New(rpctypes.ErrRequestTooLarge.Error()))), true},
		{grpcTooLarge(), true},
		{fmt.Errorf("applying: %w", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError,
			Message: "rpc error: code = ResourceExhausted desc = grpc: received message larger than max (2398635 vs. 2097152)"}}), true},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Message: rpctypes.ErrRequestTooLarge.Error()}}, true},
		{apierrors.NewBadRequest("the entry says: trying to send message larger than max"), false},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 503, Message: "trying to send message larger than max"}}, false},
		{errors.New("rpc error: code = ResourceExhausted desc = trying to send message larger than max"), false},
		{apierrors.NewInternalError(errors.New("etcdserver: request timed out")), false},
		{apierrors.NewBadRequest("the entry says: etcdserver: request is too large"), false},
		{apierrors.NewConflict(inv, "app", errors.New("etcdserver: request is too large")), false},
		{errors.New("etcdserver: request is too large"), false},
	}
	for _, c := range cases {
		if got := tooLarge(c.err); got != c.want {
			t.Errorf("tooLarge(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
