package health

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/controller/base"
)

// passCounter counts the passes of each key.
type passCounter struct {
	mu     sync.Mutex
	passes map[string]int
}

func (p *passCounter) wrap(sync base.SyncFunc) base.SyncFunc {
	return func(ctx context.Context, key string) (base.Result, error) {
		res, err := sync(ctx, key)
		p.mu.Lock()
		p.passes[key]++
		p.mu.Unlock()
		return res, err
	}
}

func (p *passCounter) get(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.passes[key]
}

// startManager runs the loop in a real manager whose cache watches f's namespace, with
// one worker, and counts passes per key.
func startManager(t *testing.T, f *fixture) *passCounter {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	must(t, err)
	h := f.newController()
	h.Reader = mgr.GetCache()
	h.Writer = mgr.GetClient()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := h.SetupWithManager(ctx, mgr, 1)
	must(t, err)
	counter := &passCounter{passes: map[string]int{}}
	c.Sync = counter.wrap(c.Sync)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return counter
}

// TestLoopDoesNotWakeItself: the loop's own health writes, a status write by the
// controller-manager and the sync annotation add no key; a change of a field that the
// controller-manager owns does. Ordering comes from sentinels: a later event on the
// same informer, for another key, processed by the same single worker.
func TestLoopDoesNotWakeItself(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.lastAttempted("r1")
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	sentinel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: "sentinel", Namespace: f.ns},
		Spec:       v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"}},
	}
	must(t, env.Client.Create(f.ctx, sentinel))
	sentinelKey := f.ns + "/sentinel"
	sentinelInventory := func(render string) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "ReleaseInventory",
			"metadata": map[string]any{"name": "sentinel", "namespace": f.ns},
			"entries":  []any{map[string]any{"group": "", "kind": "ConfigMap", "namespace": f.ns, "name": "x", "version": "v1", "resource": "configmaps", "renderRef": render}},
		}}
		must(t, env.Client.Apply(f.ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(cmManager)))
	}
	sentinelInventory("s1")

	passes := startManager(t, f)
	eventually(t, "the first pass", func() bool { return passes.get(f.key) >= 1 && passes.get(sentinelKey) >= 1 })
	eventually(t, "the Healthy condition", func() bool {
		return len(f.getRelease().Status.Conditions) == 1 && f.entry("a").State == v1alpha1.StateHealthy
	})
	// fence waits until both informers delivered every event before it: a sentinel
	// change on each, and the sentinel's passes.
	fenceN := 0
	fence := func() {
		t.Helper()
		before := passes.get(sentinelKey)
		fenceN++
		sentinelInventory("s" + time.Now().Format("150405.000000000") + string(rune('a'+fenceN)))
		eventually(t, "the inventory sentinel", func() bool { return passes.get(sentinelKey) > before })
		before = passes.get(sentinelKey)
		s := &v1alpha1.Release{}
		must(t, env.Client.Get(f.ctx, clientKey(f.ns, "sentinel"), s))
		s.Labels = map[string]string{"fence": time.Now().Format("150405") + string(rune('a'+fenceN))}
		must(t, env.Client.Update(f.ctx, s))
		eventually(t, "the Release sentinel", func() bool { return passes.get(sentinelKey) > before })
	}
	fence()
	base := passes.get(f.key)

	// The sync annotation and a controller-manager status write do not wake the loop.
	rel := f.getRelease()
	patch := client.MergeFrom(rel.DeepCopy())
	rel.Annotations = map[string]string{v1alpha1.SyncRequestedAtAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}
	must(t, env.Client.Patch(f.ctx, rel, patch))
	f.lastAttempted("r1") // same values: no change at all
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "Release",
		"metadata": map[string]any{"name": f.rel, "namespace": f.ns},
		"status":   map[string]any{"lastAttempted": map[string]any{"renderRef": "r1"}, "rollout": map[string]any{"startedAt": "2026-01-01T00:00:00Z"}},
	}}
	must(t, env.Client.Status().Apply(f.ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(cmManager)))
	// An observer-owned inventory field changes (as a health write does).
	obs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "ReleaseInventory",
		"metadata": map[string]any{"name": f.rel, "namespace": f.ns},
		"entries":  []any{map[string]any{"group": "", "kind": "ConfigMap", "namespace": f.ns, "name": "a", "state": "Healthy", "message": "touched"}},
	}}
	must(t, env.Client.Apply(f.ctx, client.ApplyConfigurationFromUnstructured(obs), client.FieldOwner("convoy-health-inventory"), client.ForceOwnership))
	fence()
	if got := passes.get(f.key); got != base {
		t.Fatalf("passes went from %d to %d on writes that must not wake the loop", base, got)
	}

	// A controller-manager field (wave) does wake it.
	f.inventory(cm("a", 1, "r1"))
	eventually(t, "a pass after a controller-manager change", func() bool { return passes.get(f.key) == base+1 })
	fence()
	if got := passes.get(f.key); got != base+1 {
		t.Fatalf("passes = %d after one wake-up and the loop's own writes, want %d", got, base+1)
	}
}

// TestClusterChangeWakesItsReleasesOnly: a Cluster spec change adds the keys of the
// Releases that reference it (through the Release-by-Cluster index), not the others of
// the namespace. A fence (a label change of the other Release, through the same single
// worker) orders the check after every key that the Cluster event added.
func TestClusterChangeWakesItsReleasesOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	must(t, env.Client.Create(f.ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: f.ns}}))
	f.release(nil, 0)
	must(t, env.Client.Create(f.ctx, &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: f.ns},
		Spec:       v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "other"}},
	}))
	elsewhere := f.ns + "/elsewhere"
	passes := startManager(t, f)
	fenceN := 0
	fence := func() {
		t.Helper()
		before := passes.get(elsewhere)
		fenceN++
		r := &v1alpha1.Release{}
		must(t, env.Client.Get(f.ctx, clientKey(f.ns, "elsewhere"), r))
		r.Labels = map[string]string{"fence": string(rune('a' + fenceN))}
		must(t, env.Client.Update(f.ctx, r))
		eventually(t, "the fence", func() bool { return passes.get(elsewhere) > before })
	}
	eventually(t, "the first passes", func() bool { return passes.get(f.key) >= 1 && passes.get(elsewhere) >= 1 })
	fence()
	before, beforeElsewhere := passes.get(f.key), passes.get(elsewhere)
	cl := &v1alpha1.Cluster{}
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "other"), cl))
	cl.Spec.Shard = "moved"
	must(t, env.Client.Update(f.ctx, cl))
	eventually(t, "a pass of the Release of the changed Cluster", func() bool { return passes.get(elsewhere) > beforeElsewhere })
	fence()
	if got := passes.get(f.key); got != before {
		t.Fatalf("the Release of an unchanged Cluster had %d more passes", got-before)
	}
}
