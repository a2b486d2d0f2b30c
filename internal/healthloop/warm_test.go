package healthloop

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// TestWarmStartWatchesBeforeThePass: the warm start starts the informers of what the
// recorded inventories name, with the fields that the GlobalHealthRuleSets read, before
// any pass; a Release without healthAssessment, one whose Cluster is missing and one of
// another shard start nothing. The pass then keeps those informers.
func TestWarmStartWatchesBeforeThePass(t *testing.T) {
	f := newFixture(t)
	cache, _ := f.watching()
	gs := &extv1alpha1.GlobalHealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: "warm-" + f.ns},
		Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: readyRule}}}}
	must(t, env.Client.Create(f.ctx, gs))
	t.Cleanup(func() { _ = env.Client.Delete(f.ctx, gs) })
	f.configMapRules("rules", readyRule)
	f.configMap("a", "true")
	f.release(localRules(0), 0)
	f.inventory(cm("a", 0, ""))
	// Releases that warm leaves to their passes.
	for _, other := range []struct {
		name, cluster string
		ha            *v1alpha1.HealthAssessment
	}{{"no-assessment", "target", nil}, {"no-cluster", "missing", localRules(0)}, {"other-shard", "sharded", localRules(0)}} {
		must(t, env.Client.Create(f.ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: other.name},
			Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: other.cluster}, HealthAssessment: other.ha}}))
		rel := f.rel
		f.rel = other.name
		f.inventory(cmEntry{version: "v1", kind: "Secret", resource: "secrets", name: other.name})
		f.rel = rel
	}
	must(t, env.Client.Create(f.ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "sharded"},
		Spec: v1alpha1.ClusterSpec{Shard: "elsewhere"}}))

	f.h.warm(f.ctx, client.InNamespace(f.ns))
	target := toolscache.ObjectName{Namespace: f.ns, Name: "target"}.String()
	scopes := cache.Scopes(target)
	if len(scopes) != 1 || !strings.HasPrefix(scopes[0], "configmaps") {
		t.Fatalf("after the warm start the target cache watches %v: want the ConfigMaps only", scopes)
	}
	if got := cache.Scopes(toolscache.ObjectName{Namespace: f.ns, Name: "sharded"}.String()); len(got) != 0 {
		t.Fatalf("another shard's Cluster is watched: %v", got)
	}
	kept, ok := cache.RuleFields()
	if want := health.FieldsOf([]extv1alpha1.GlobalHealthRuleSet{*gs}, nil).For("v1", "configmaps"); !ok || !kept.For("v1", "configmaps").Covers(want) {
		t.Fatalf("after the warm start the cache keeps %v (set: %v): want what the global rules read", kept, ok)
	}
	f.passHealthy()
	if got := cache.Scopes(target); len(got) != 1 || got[0] != scopes[0] {
		t.Fatalf("after the pass the target cache watches %v: want the warm start's %v", got, scopes)
	}
}

// TestWarmStartWaitsForTheCaches: the leader's warm start (the manager's Runnable)
// waits until the management caches it reads are filled, then starts the informers of
// what the recorded inventories name; it does not run on caches that have not started.
func TestWarmStartWaitsForTheCaches(t *testing.T) {
	f := newFixture(t)
	cache, _ := f.watching()
	f.configMapRules("rules", readyRule)
	f.configMap("a", "true")
	f.release(localRules(0), 0)
	f.inventory(cm("a", 0, ""))
	ca, err := ctrlcache.New(env.Config, ctrlcache.Options{Scheme: env.Client.Scheme(),
		DefaultNamespaces: map[string]ctrlcache.Config{f.ns: {}}})
	must(t, err)
	f.h.Reader = ca
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- (&warmStart{h: f.h, cache: ca}).Start(ctx) }()
	target := toolscache.ObjectName{Namespace: f.ns, Name: "target"}.String()
	select {
	case err := <-done:
		t.Fatalf("the warm start returned (%v) before its caches started (target cache watches %v)", err, cache.Scopes(target))
	case <-time.After(300 * time.Millisecond):
	}
	go func() { _ = ca.Start(ctx) }()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the warm start did not return after its caches synced")
	}
	if scopes := cache.Scopes(target); len(scopes) != 1 || !strings.HasPrefix(scopes[0], "configmaps") {
		t.Fatalf("after the warm start the target cache watches %v: want the ConfigMaps", scopes)
	}
}
