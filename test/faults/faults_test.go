package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// releasesPerRound is how many Releases converge at once in a round.
func releasesPerRound() int {
	if long {
		return 6
	}
	return 2
}

// fault is one kind of fault: inject starts it and returns the function that ends it,
// which returns when the fault ended (convergence is measured from then).
type fault struct {
	name   string
	inject func(t *testing.T, w *world, ns string) (end func() time.Time)
	// target puts the Releases' objects in a separate target cluster behind its own
	// proxy (w.target); without it they live in the management cluster.
	target bool
	// replicas > 1 runs that many observers of the one shard with leader election, each
	// behind its own proxy and with its own path to the sync endpoint.
	replicas int
}

// now ends a fault at the moment end is called.
func now(end func()) func() time.Time {
	return func() time.Time { end(); return time.Now() }
}

// world is what one test's rounds share: the proxy, the sync endpoint, the observer.
type world struct {
	proxy  *faultProxy // replica 0's way to the management cluster
	api    *syncAPI
	obs    *observer // replica 0
	ns     string
	target *targetCluster // nil: the Releases' objects are in the management cluster
	reps   []*replica
	kills  []kill // of replicas with leader election
}

// replica is one observer process and its own proxy to the management cluster.
type replica struct {
	proxy *faultProxy
	obs   *observer
}

var nsSeq atomic.Int32

// TestFaults runs rounds of each fault while Releases converge, and checks the
// invariants after each round (see the package documentation).
func TestFaults(t *testing.T) {
	faults := []fault{
		{name: "proxy", inject: injectProxy},
		{name: "conflicts", inject: injectConflicts},
		{name: "syncdown", inject: injectSyncDown},
		{name: "kill", inject: injectKill},
		{name: "compact", inject: injectCompact},
		{name: "target", inject: injectTarget, target: true},
		{name: "handover", inject: injectHandover, replicas: 2},
		{name: "apiserver", inject: injectAPIServerRestart},
	}
	if !long {
		// envtest waits 20s for kube-apiserver to stop while watches are open: a restart
		// round is too slow for make test's budget.
		faults = faults[:len(faults)-1]
	}
	var report []string
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			converge, unknown := runRounds(t, f)
			if len(converge) > 0 {
				report = append(report, fmt.Sprintf("%-10s rounds=%d releases/round=%d converge p50=%v p99=%v max=%v unknown=%d",
					f.name, len(converge), releasesPerRound(), pct(converge, 50), pct(converge, 99), slices.Max(converge), unknown))
			}
		})
	}
	t.Logf("fault figures (time from the end of the fault until every Release of the round converged):\n%s", strings.Join(report, "\n"))
}

// runRounds runs the rounds of fault f against one observer process and returns the
// convergence time of each round, and how many times an entry or a Release's Healthy
// condition turned Unknown.
func runRounds(t *testing.T, f fault) ([]time.Duration, int) {
	ns := fmt.Sprintf("faults-%s-%d", f.name, nsSeq.Add(1))
	setupNamespace(t, ns)
	w := &world{api: newSyncAPI(t), ns: ns}
	if f.target {
		w.target = startTargetCluster(t, ns)
	}
	for i := range max(1, f.replicas) {
		p := newFaultProxy(t, restConfig())
		syncURL, extra := w.api.url(), []string(nil)
		if f.replicas > 1 {
			syncURL, extra = fmt.Sprintf("%s/%s%d", syncURL, replicaPrefix, i), leaderElectionArgs(ns)
		}
		w.reps = append(w.reps, &replica{proxy: p, obs: startObserver(t, p.kubeconfig(t), syncURL, ns, extra...)})
	}
	w.proxy, w.obs = w.reps[0].proxy, w.reps[0].obs
	var converge []time.Duration
	unknown := 0
	for round := range rounds() {
		d, n, ok := runRound(t, w, f, round)
		if !ok {
			break
		}
		converge, unknown = append(converge, d), unknown+n
	}
	for _, r := range w.reps {
		if p := r.obs.panics(); len(p) > 0 {
			t.Errorf("the observer panicked:\n%s", strings.Join(p, "\n"))
		}
		if races := r.obs.races(); len(races) > 0 {
			t.Errorf("the race detector reported %d data races in the observer:\n%s", len(races), strings.Join(races, "\n"))
		}
	}
	return converge, unknown
}

// runRound starts the Releases of one round, injects the fault while they converge,
// ends it, waits for every Release and checks the invariants.
func runRound(t *testing.T, w *world, f fault, round int) (time.Duration, int, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*stageTimeout)
	defer cancel()
	rels := make([]*release, releasesPerRound())
	errs := make([]error, len(rels))
	var wg sync.WaitGroup
	for i := range rels {
		rels[i] = &release{ns: w.ns, name: fmt.Sprintf("r%d-%d", round, i), api: w.api, cluster: "local"}
		if w.target != nil {
			rels[i].cluster, rels[i].tc, rels[i].rollsOut = targetClusterName, w.target.client, w.target.rollsOut
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = rels[i].run(ctx) }()
	}
	time.Sleep(time.Duration(300+rand.IntN(2500)) * time.Millisecond) // hit the scenario at a random point
	end := f.inject(t, w, w.ns)
	time.Sleep(time.Duration(2000+rand.IntN(3000)) * time.Millisecond)
	ended := end()
	for _, r := range w.reps {
		if r.obs.exitedEarly() {
			t.Fatalf("round %d: the observer exited:\n%s", round, r.obs.tail())
		}
	}
	wg.Wait()
	ok := true
	var last time.Time
	for i, r := range rels {
		if errs[i] != nil {
			t.Errorf("round %d: %v (an edge or a state was lost)", round, errs[i])
			ok = false
			continue
		}
		if r.finished.After(last) {
			last = r.finished
		}
	}
	// Steady: no sync request for a converged Release. A retry of a write that failed
	// in the fault may still send one duplicate (at least once) within the first
	// seconds, so the window starts after a settling time.
	time.Sleep(2 * time.Second)
	steadyFrom := time.Now()
	time.Sleep(3 * time.Second)
	for _, r := range rels {
		if n := w.api.since(r.key(), steadyFrom); n > 0 && ok {
			t.Errorf("round %d: steady Release %s got %d sync requests", round, r.key(), n)
		}
		for _, v := range r.violations {
			t.Errorf("round %d: invariant broken: %s", round, v)
			ok = false
		}
	}
	for _, v := range w.oneWriter() {
		t.Errorf("round %d: invariant broken: %s", round, v)
		ok = false
	}
	if !ok {
		for i, r := range w.reps {
			t.Logf("observer %d log tail:\n%s", i, r.obs.tail())
		}
		return 0, 0, false
	}
	unknown, whys := 0, map[string]int{}
	for _, r := range rels {
		unknown += r.unknowns
		for why := range r.unknownWhy {
			if len(why) > 110 { // cut before the hold-down's time stamps
				why = why[:110] + "…"
			}
			whys[why]++
		}
	}
	for why, n := range whys {
		t.Logf("round %d: %d Releases turned Unknown: %s", round, n, why)
	}
	return max(0, last.Sub(ended)), unknown, true
}

// injectProxy makes the proxy answer 40% of the requests with one fault, chosen per round.
func injectProxy(t *testing.T, w *world, _ string) func() time.Time {
	modes := strings.Split(proxyModeAll, ",")
	mode := modes[rand.IntN(len(modes))]
	t.Logf("proxy fault: %s", mode)
	w.proxy.set(mode, 0.4)
	return now(func() { w.proxy.set(modeNone, 0) })
}

// injectConflicts has another field manager write every inventory and Release status of
// the namespace as fast as it can, so the observer's preconditioned writes conflict.
func injectConflicts(t *testing.T, w *world, ns string) func() time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for tick := 0; ctx.Err() == nil; tick++ {
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion("convoy.kumodo.io/v1alpha1")
			list.SetKind("ReleaseInventoryList")
			if err := kube().List(ctx, list, client.InNamespace(ns)); err != nil {
				continue
			}
			for _, inv := range list.Items {
				stamp := fmt.Sprint(tick)
				u := acv1alpha1.ReleaseInventory(inv.GetName(), ns).WithAnnotations(map[string]string{"faults/tick": stamp})
				_ = kube().Apply(ctx, u, client.FieldOwner("fault-writer"), client.ForceOwnership)
				s := acv1alpha1.Release(inv.GetName(), ns).WithStatus(acv1alpha1.ReleaseStatus().WithConditions(metav1ac.Condition().
					WithType("FaultTick").WithStatus(metav1.ConditionTrue).WithReason("Tick").WithMessage(stamp).
					WithLastTransitionTime(metav1.NewTime(time.Now()))))
				_ = kube().Status().Apply(ctx, s, client.FieldOwner("fault-writer"), client.ForceOwnership)
			}
		}
	}()
	return now(func() { cancel(); wg.Wait() })
}

// injectSyncDown takes the sync endpoint down (connection refused).
func injectSyncDown(t *testing.T, w *world, _ string) func() time.Time {
	w.api.setDown(t, true)
	return now(func() { w.api.setDown(t, false) })
}

// injectKill kills the observer with SIGKILL and restarts it, once or twice; the fault
// ends with the last restart.
func injectKill(t *testing.T, w *world, _ string) func() time.Time {
	w.obs.kill()
	w.obs.start()
	if rand.IntN(2) == 0 {
		time.Sleep(time.Duration(200+rand.IntN(1500)) * time.Millisecond)
		w.obs.kill()
		w.obs.start()
	}
	restarted := time.Now()
	return func() time.Time { return restarted }
}

// injectCompact writes a little outside the observer's namespace (so that its watches
// lag etcd's head), compacts etcd at its current revision and drops the observer's
// connections: every watch resumes from a compacted resourceVersion, gets 410 Gone
// ("too old resource version") and re-lists. A watch that was still starting (an
// observer that has just started lists first) may miss it, so the compaction is
// repeated, up to three times, until some watch got a 410; the round fails when none
// did, so a compaction that misses the observer cannot pass for one that hit it.
func injectCompact(t *testing.T, w *world, _ string) func() time.Time {
	ctx := context.Background()
	before := w.proxy.gone.Load()
	var revs []int64
	for attempt := 0; attempt < 3 && w.proxy.gone.Load() == before; attempt++ {
		for i := range 3 {
			cm := corev1ac.ConfigMap("faults-churn", "default").WithData(map[string]string{"n": fmt.Sprint(i)})
			must(t, kube().Apply(ctx, cm, client.FieldOwner("fault-churn"), client.ForceOwnership))
		}
		rev, err := compactEtcd(ctx)
		must(t, err)
		revs = append(revs, rev)
		w.proxy.dropConnections()
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && w.proxy.gone.Load() == before; {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return now(func() {
		n := w.proxy.gone.Load() - before
		if n == 0 {
			t.Errorf("etcd compacted at revisions %v, but no watch of the observer got 410 Gone: none had to re-list", revs)
			return
		}
		t.Logf("etcd compacted at revisions %v: %d watches of the observer got 410 Gone and re-listed", revs, n)
	})
}

// injectAPIServerRestart stops kube-apiserver (etcd keeps the data) and starts it again
// when the fault ends.
func injectAPIServerRestart(t *testing.T, w *world, _ string) func() time.Time {
	if err := env.StopAPIServer(); err != nil {
		// envtest gives up waiting for a graceful stop while watches are open; the
		// process is gone by then.
		t.Logf("stopping kube-apiserver: %v", err)
	}
	return now(func() {
		if err := env.StartAPIServer(); err != nil {
			t.Fatalf("starting kube-apiserver again: %v", err)
		}
		cfg, err := reconnect()
		if err != nil {
			t.Fatalf("reconnecting to kube-apiserver: %v", err)
		}
		if err := w.proxy.setUpstream(cfg); err != nil {
			t.Fatal(err)
		}
	})
}

// pct returns the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(0, min(len(s)-1, i-1))].Round(10 * time.Millisecond)
}
