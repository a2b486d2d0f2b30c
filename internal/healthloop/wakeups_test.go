package healthloop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/controllerkit"
)

// passCounter counts the passes of each key.
type passCounter struct {
	mu     sync.Mutex
	passes map[string]int
}

func (p *passCounter) wrap(sync controllerkit.SyncFunc) controllerkit.SyncFunc {
	return func(ctx context.Context, key string) (controllerkit.Result, error) {
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
// one worker, and counts passes per key. setup changes the loop before it is wired.
func startManager(t *testing.T, f *fixture, setup ...func(h *HealthController)) *passCounter {
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
	for _, fn := range setup {
		fn(h)
	}
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
		ac := acv1alpha1.ReleaseInventory("sentinel", f.ns).WithEntries(acv1alpha1.InventoryEntry().
			WithGroup("").WithKind("ConfigMap").WithNamespace(f.ns).WithName("x").WithVersion("v1").WithResource("configmaps").WithRenderRef(render))
		must(t, env.Client.Apply(f.ctx, ac, client.FieldOwner(cmManager)))
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
	st := acv1alpha1.Release(f.rel, f.ns).WithStatus(acv1alpha1.ReleaseStatus().
		WithLastAttempted(acv1alpha1.AttemptStatus().WithRenderRef("r1")).
		WithRollout(acv1alpha1.RolloutStatus().WithStartedAt(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))))
	must(t, env.Client.Status().Apply(f.ctx, st, client.FieldOwner(cmManager)))
	// An observer-owned inventory field changes (as a health write does).
	obs := acv1alpha1.ReleaseInventory(f.rel, f.ns).WithEntries(acv1alpha1.InventoryEntry().
		WithGroup("").WithKind("ConfigMap").WithNamespace(f.ns).WithName("a").WithState(v1alpha1.StateHealthy).WithMessage("touched"))
	must(t, env.Client.Apply(f.ctx, obs, client.FieldOwner("convoy-health-inventory"), client.ForceOwnership))
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

// TestTargetChangeWakesThroughTheController: in the running controller, a change of a
// recorded target object queues its Release (the cluster cache's notification reaches
// the controller's queue); nothing else would: the Release is Healthy and has no
// syncPolicy.interval, so no re-check is scheduled.
func TestTargetChangeWakesThroughTheController(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.lastAttempted("r1")
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	passes := startManager(t, f, func(h *HealthController) {
		h.Clusters = clustercache.New(clustercache.Options{Local: env.Config, SecretReader: env.Client, Watch: true})
	})
	eventually(t, "the entry to turn Healthy", func() bool { return f.entry("a").State == v1alpha1.StateHealthy })
	first := passes.get(f.key)
	n := 0
	// The informer of ConfigMaps starts with the first pass; until its first list is done,
	// a change is part of that list and wakes nothing, so the change is repeated.
	eventually(t, "a pass woken by the ConfigMap's change", func() bool {
		n++
		ac := corev1ac.ConfigMap("a", f.ns).WithData(map[string]string{"ready": "false", "n": fmt.Sprint(n)})
		must(t, env.Client.Apply(f.ctx, ac, client.FieldOwner("test"), client.ForceOwnership))
		return f.entry("a").State == v1alpha1.StateProgressing
	})
	eventually(t, "the woken pass to be counted", func() bool { return passes.get(f.key) > first })
}

// TestRuleSetChangesWakeTheirReleases: a HealthRuleSet change queues the Releases of its
// namespace, and a GlobalHealthRuleSet change every Release (docs/design.md, "Events that add a key"). The Release
// is Healthy without syncPolicy.interval, so only these events bring a pass. Not
// parallel: a GlobalHealthRuleSet wakes the Releases of every other test's manager too.
func TestRuleSetChangesWakeTheirReleases(t *testing.T) {
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.lastAttempted("r1")
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	passes := startManager(t, f)
	eventually(t, "the entry to turn Healthy", func() bool { return f.entry("a").State == v1alpha1.StateHealthy })

	before := passes.get(f.key)
	g := &extv1alpha1.GlobalHealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: "wake-" + f.ns},
		Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{
			APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "true",
		}}},
	}
	must(t, env.Client.Create(f.ctx, g))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), g) })
	eventually(t, "a pass after a GlobalHealthRuleSet was created", func() bool { return passes.get(f.key) > before })

	rs := &extv1alpha1.HealthRuleSet{}
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "rules"), rs))
	rs.Spec.Rules[0].RuleExpression = "object.?data.?ready.orValue('') == 'false'"
	must(t, env.Client.Update(f.ctx, rs))
	eventually(t, "a pass with the changed HealthRuleSet", func() bool { return f.entry("a").State == v1alpha1.StateProgressing })
}

// TestRuleSetAndClusterChangesWakeTheLoop: with every entry Healthy and no interval the
// loop has nothing scheduled, so only an event brings a pass: a changed HealthRuleSet, a
// changed GlobalHealthRuleSet, a changed Cluster each turn the Release's condition
// within the bounded wait (docs/design.md, "Events that add a key"). It runs alone (not
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
