package clustercache

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestCompactForCache: the cache keeps a target object as its stripped JSON; the store
// keys it by namespace/name, the change handler sees its resourceVersion and kind, and
// every read decodes a fresh copy equal to the stripped object (numbers stay int64).
func TestCompactForCache(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "demo", "resourceVersion": "42",
			"managedFields": []any{map[string]any{"manager": "m"}},
			"annotations":   map[string]any{lastAppliedAnnotation: "{}", "keep": "me"},
		},
		"spec":   map[string]any{"replicas": int64(3)},
		"status": map[string]any{"readyReplicas": int64(3), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}},
	}}
	want := u.DeepCopy()
	want.SetManagedFields(nil)
	want.SetAnnotations(map[string]string{"keep": "me"})

	obj, err := compactForCache(nil, schema.GroupVersionKind{})(u)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := obj.(*compactObject)
	if !ok {
		t.Fatalf("cached as %T, want *compactObject", obj)
	}
	if key, err := toolscache.MetaNamespaceKeyFunc(c); err != nil || key != "demo/web" {
		t.Fatalf("store key = %q, %v", key, err)
	}
	if c.GetResourceVersion() != "42" || cachedKind(c) != "Deployment" {
		t.Fatalf("resourceVersion %q, kind %q", c.GetResourceVersion(), cachedKind(c))
	}
	got, err := cachedUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Object, want.Object) {
		t.Fatalf("read back %v, want %v", got.Object, want.Object)
	}
	got.Object["status"] = nil // a reader's change stays its own
	again, _ := cachedUnstructured(c)
	if again.Object["status"] == nil {
		t.Fatal("a read shares its maps with the cache")
	}
	tomb := toolscache.DeletedFinalStateUnknown{Key: "demo/web", Obj: c}
	if out, _ := compactForCache(nil, schema.GroupVersionKind{})(tomb); out != any(tomb) {
		t.Fatalf("a tombstone became %T", out)
	}
}

// syncAfter is an informer that reports synced once synced is set.
type syncAfter struct {
	toolscache.SharedIndexInformer
	synced atomic.Bool
}

func (s *syncAfter) HasSynced() bool { return s.synced.Load() }

// TestReadWaitsForAStreamingList (issue #12): a read waits for a first list that keeps
// delivering objects, however long it takes beyond SyncWait (a big list is not worth a
// GET per read), and gives up on one that delivered nothing for SyncWait (a cluster that
// stopped answering: the read then asks the server, which says so). Time is the cache's
// clock, here a fake one that the test steps.
func TestReadWaitsForAStreamingList(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := &targetWatches{opts: &Options{SyncWait: time.Second, Clock: clk}}
	inf := &syncAfter{}
	s := &scopeInformer{informer: inf, clock: clk}
	s.touch()
	done := make(chan error)
	go func() { done <- w.waitSynced(context.Background(), s) }()
	// Objects arrive every 20ms for 3 SyncWaits; then the list completes.
	for i := 0; i < 150; i++ {
		clk.Step(20 * time.Millisecond)
		s.touch()
	}
	inf.synced.Store(true)
	if err := stepUntil(clk, done); err != nil {
		t.Fatalf("a read gave up on a first list that kept streaming: %v", err)
	}

	stalled := &scopeInformer{informer: &syncAfter{}, clock: clk}
	stalled.touch()
	start := clk.Now()
	go func() { done <- w.waitSynced(context.Background(), stalled) }()
	if err := stepUntil(clk, done); !errors.Is(err, errStalled) {
		t.Fatalf("waiting for a first list that delivered nothing: %v, want %v", err, errStalled)
	}
	if waited := clk.Since(start); waited < time.Second {
		t.Fatalf("gave up on a silent first list after %v, before SyncWait (1s)", waited)
	}
}

// stepUntil steps clk by 10ms until done delivers, and returns what it delivered.
func stepUntil(clk *clocktesting.FakeClock, done <-chan error) error {
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Millisecond):
			clk.Step(10 * time.Millisecond)
		}
	}
}

// TestStripForCache: managedFields and the last-applied annotation go; the rest stays.
func TestStripForCache(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
		"name": "x", "managedFields": []any{map[string]any{"manager": "m"}},
		"annotations": map[string]any{lastAppliedAnnotation: "{}"},
	}, "status": map[string]any{"ready": true}}}
	out, err := stripForCache(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if got.GetManagedFields() != nil || got.GetAnnotations() != nil || got.Object["status"] == nil {
		t.Fatalf("stripped = %v", got.Object)
	}
}
