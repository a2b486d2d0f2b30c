package healthloop

import (
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// wakeLog records the keys that target changes enqueue, in order.
type wakeLog struct {
	mu   sync.Mutex
	keys []string
}

func (w *wakeLog) add(k string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys = append(w.keys, k)
}

func (w *wakeLog) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.keys)
}

// watching switches f's loop to a watch-fed cluster cache whose object changes are
// recorded in the returned log (the loop's Enqueue).
func (f *fixture) watching() (*clustercache.Cache, *wakeLog) {
	cache := clustercache.New(clustercache.Options{Local: env.Config, SecretReader: env.Client, Watch: true})
	log := &wakeLog{}
	f.h.Clusters = cache
	f.h.Enqueue = log.add
	cache.Watch(f.h.targetChanged, nil)
	return cache, log
}

// TestTargetChangeWakesOnlyItsReleases: two Releases on one Cluster record different
// ConfigMaps and share one; a change of each object enqueues exactly the Releases that
// record it, and the pass then reads the new state from the cache.
func TestTargetChangeWakesOnlyItsReleases(t *testing.T) {
	f := newFixture(t)
	_, log := f.watching()
	f.configMapRules("rules", readyRule)
	for _, cmName := range []string{"a", "b", "shared"} {
		f.configMap(cmName, "true")
	}
	f.release(localRules(0), 0)
	f.inventory(cm("a", 0, "r1"), cm("shared", 0, "r1"))
	f.lastAttempted("r1")
	app := f.key
	f.rel = "other"
	f.release(localRules(0), 0)
	f.inventory(cm("b", 0, "r1"), cm("shared", 0, "r1"))
	f.lastAttempted("r1")
	other := f.ns + "/other"
	f.rel = "app"

	for _, k := range []string{app, other} {
		if _, err := f.h.syncHandler(f.ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	f.expectCondition("True", v1alpha1.ReasonHealthy)

	f.configMap("a", "false")
	eventually(t, "the change of a to wake "+app, func() bool { return len(log.get()) >= 1 })
	f.configMap("b", "false")
	eventually(t, "the change of b to wake "+other, func() bool { return len(log.get()) >= 2 })
	// Events of one informer arrive in order: had a's change woken other, it would
	// come before b's.
	if got := log.get(); !slices.Equal(got, []string{app, other}) {
		t.Fatalf("woken = %v, want [%s %s]", got, app, other)
	}
	f.configMap("shared", "false")
	eventually(t, "the change of shared to wake both", func() bool { return len(log.get()) >= 4 })
	got := log.get()[2:]
	sort.Strings(got)
	if want := []string{app, other}; !slices.Equal(got, want) {
		t.Fatalf("woken by the shared object = %v, want %v", got, want)
	}

	// The woken pass reads the change from the cache.
	f.pass()
	f.expectEntry("a", v1alpha1.StateProgressing, "ready=false")
	f.expectEntry("shared", v1alpha1.StateProgressing, "ready=false")
}

// TestTrackedTypesFollowTheInventory: an entry of a type the cluster does not watch yet
// starts a watch; when no inventory records the type any more, its watch stops; a
// deleted Release stops waking.
func TestTrackedTypesFollowTheInventory(t *testing.T) {
	f := newFixture(t)
	cache, log := f.watching()
	f.configMapRules("rules", readyRule)
	f.configMap("a", "true")
	f.release(localRules(0), 0)
	f.lastAttempted("r1")
	clusterKey := f.ns + "/target"
	f.pass()
	if got := cache.Scopes(clusterKey); len(got) != 0 {
		t.Fatalf("scopes with an empty inventory = %v", got)
	}
	f.inventory(cm("a", 0, "r1"))
	f.pass()
	if got, want := cache.Scopes(clusterKey), []string{"configmaps in " + f.ns}; !slices.Equal(got, want) {
		t.Fatalf("scopes = %v, want %v", got, want)
	}
	f.expectEntry("a", v1alpha1.StateHealthy, "")
	f.inventory()
	f.pass()
	if got := cache.Scopes(clusterKey); len(got) != 0 {
		t.Fatalf("scopes after the entry went away = %v, want none", got)
	}

	f.inventory(cm("a", 0, "r1"))
	f.pass()
	must(t, env.Client.Delete(f.ctx, f.getRelease()))
	f.pass() // the Release is gone: forget it
	if got := cache.Scopes(clusterKey); len(got) != 0 {
		t.Fatalf("scopes after the Release was deleted = %v, want none", got)
	}
	if got := cache.Readers(clustercache.ObjectKey{Cluster: clusterKey, Kind: "ConfigMap", Namespace: f.ns, Name: "a"}); len(got) != 0 {
		t.Fatalf("index still maps a to %v", got)
	}
	_ = log
}

// TestHookWorkloadFromTheCache: a polled hook's Job is read from the same cache: its
// type is watched while the hook runs, its completion wakes the Release, and the watch
// stops once the hook has finished (it is no longer polled).
func TestHookWorkloadFromTheCache(t *testing.T) {
	f := newFixture(t)
	cache, log := f.watching()
	f.release(nil, 0)
	f.job("migrate")
	f.hooks(hook{name: "migrate", kind: "Job", workload: "migrate", createdAt: t0.Add(-time.Minute)})
	f.pass()
	f.expectHook("migrate", v1alpha1.HookRunning, "")
	clusterKey := f.ns + "/target"
	if got, want := cache.Scopes(clusterKey), []string{"jobs.batch in " + f.ns}; !slices.Equal(got, want) {
		t.Fatalf("scopes = %v, want %v", got, want)
	}
	j := &batchv1.Job{}
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "migrate"), j))
	now := metav1.Now()
	j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
	j.Status.Conditions = complete("done")
	must(t, env.Client.Status().Update(f.ctx, j))
	eventually(t, "the Job's completion to wake the Release", func() bool { return slices.Contains(log.get(), f.key) })
	eventually(t, "the pass to read the completed Job from the cache", func() bool {
		f.pass()
		return f.hookEntry("migrate").State == v1alpha1.HookSucceeded
	})
	f.pass() // the hook is finished: not polled, not watched
	if got := cache.Scopes(clusterKey); len(got) != 0 {
		t.Fatalf("scopes after the hook finished = %v, want none", got)
	}
}
