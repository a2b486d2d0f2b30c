package observer_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/observer"
)

// noisyTenant is the shape of TestNoisyTenant: team A has releases Releases of objects
// ConfigMaps each under an admissible but expensive rule set, re-checked every interval;
// team B has one Release of one ConfigMap under a cheap rule.
type noisyTenant struct {
	releases, objects int
	// heavyRules are A's rules: each costs a good part of the per-expression limit on
	// every ConfigMap.
	heavyRules []string
	interval   time.Duration
	flips      int // status flips of B's object measured
}

// The short form runs in make test; FAIRNESS_LONG=1 runs the measurement of
// docs/operations.md ("Tenants and fairness"): 20 × 50 ConfigMaps under a nested
// comprehension just under the cost limit plus a regex, every 5 s.
var (
	noisyShort = noisyTenant{releases: 8, objects: 16, interval: 2 * time.Second, flips: 3,
		heavyRules: repeat(nearLimitRule, 3)}
	// Under the race detector one evaluation takes 5 to 10 times longer.
	noisyShortRace = noisyTenant{releases: 4, objects: 16, interval: 2 * time.Second, flips: 3,
		heavyRules: repeat(nearLimitRule, 1)}
	noisyLong = noisyTenant{releases: 20, objects: 50, interval: 5 * time.Second, flips: 20,
		heavyRules: append(repeat(nearLimitRule, 8), "object.data.payload.matches('^(a|b|ab)*c?(a|b)*$') || true")}
)

// nearLimitRule is a nested comprehension that costs 90% of the per-expression limit
// (about 20 ms of CPU on a current core).
const nearLimitRule = "lists.range(500).all(i, lists.range(200).exists(j, j == 199 && i >= 0)) && has(object.data)"

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestNoisyTenant: while team A's expensive rules keep the observer's cores busy, team
// B's Release still reacts to a change of its object at once, and A's Releases still
// converge (A is slowed, never starved).
//
// The short form asserts the fairness by counts, not by time: B's first pass and each of
// B's reactions are served while A's evaluations go on, and each of B's reactions lasts
// as long as a handful of A's evaluations (by their mean CPU time) and sees a handful of
// them finish (the ones in flight when B's evaluation arrived, plus what runs while B's
// pass reads and writes), never the backlog of A's passes in flight (A's Releases ×
// min(objects, --target-read-concurrency) evaluations) that it would wait behind, or
// share the cores with, without fair evaluation. The long form (FAIRNESS_LONG=1) measures the
// issue's workload and asserts B's reaction p50 ≤ 2 s and max ≤ 5 s.
func TestNoisyTenant(t *testing.T) {
	shape, long := noisyShort, os.Getenv("FAIRNESS_LONG") != ""
	switch {
	case long:
		shape = noisyLong
	case raceEnabled:
		shape = noisyShortRace
	}
	ctx := context.Background()
	nsA, nsB := namespace(t), namespace(t)
	for _, ns := range []string{nsA, nsB} {
		cluster(t, ns, "target", "", nil)
	}
	var rules []extv1alpha1.RuleSpec
	for _, r := range shape.heavyRules {
		rules = append(rules, extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: r})
	}
	must(t, env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: "heavy", Namespace: nsA},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: rules}}))
	must(t, env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: "ready", Namespace: nsB},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"},
			RuleExpression: "object.?data.?ready.orValue('') == 'true'"}}}}))
	payload := ""
	for range 400 {
		payload += "ab"
	}
	for r := range shape.releases {
		name := fmt.Sprintf("a%d", r)
		var entries []v1alpha1.InventoryEntry
		for o := range shape.objects {
			cm := fmt.Sprintf("%s-%d", name, o)
			must(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: nsA},
				Data: map[string]string{"payload": payload}}))
			entries = append(entries, v1alpha1.InventoryEntry{Kind: "ConfigMap", Namespace: nsA, Name: cm, Version: "v1", Resource: "configmaps"})
		}
		noisyRelease(t, nsA, name, shape.interval, entries)
	}
	must(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: nsB},
		Data: map[string]string{"ready": "true"}}))
	noisyRelease(t, nsB, "b", time.Minute, []v1alpha1.InventoryEntry{{Kind: "ConfigMap", Namespace: nsB, Name: "web", Version: "v1", Resource: "configmaps"}})

	var bAlone []time.Duration
	if long {
		// B's reaction with A idle: before the observer sees A's rules work, measure B
		// alone on a replica that watches only B's namespace.
		stopB := startReplica(t, nsB)
		waitReason(t, nsB, "b", v1alpha1.ReasonHealthy)
		for i := range shape.flips {
			bAlone = append(bAlone, flipB(t, nsB, i))
		}
		stopB()
		t.Logf("B's reaction alone: p50 %v, max %v (%d flips)", percentile(bAlone, 50), slices.Max(bAlone), len(bAlone))
	}

	cpu0 := processCPU()
	start := time.Now()
	startReplica(t, nsA, nsB)
	waitReason(t, nsB, "b", v1alpha1.ReasonHealthy)
	perPass := min(shape.objects, 16) // --target-read-concurrency
	backlog := shape.releases * perPass
	// At most the evaluations in flight when B's arrived, twice over, plus those of the
	// slots while B's pass reads and writes: a small count next to the backlog.
	bound := uint64(backlog / 4)
	aAtFirst := evaluations(t, nsA)
	// B's reactions are measured while A's evaluations run.
	eventually(t, "team A's first evaluation", func() bool { return evaluations(t, nsA) > 0 })
	t.Logf("B Healthy after %d of A's evaluations (backlog %d)", aAtFirst, backlog)
	if !long && aAtFirst > bound {
		t.Errorf("B's first pass was served after %d of A's evaluations; want at most %d (A's passes in flight hold %d)", aAtFirst, bound, backlog)
	}
	var bLoaded []time.Duration
	for i := range shape.flips {
		n0 := evaluations(t, nsA)
		d := flipB(t, nsB, i)
		n := evaluations(t, nsA) - n0
		bLoaded = append(bLoaded, d)
		// B's reaction in units of one of A's evaluations (its mean CPU time): the same
		// count whatever the speed of the machine.
		units := d.Seconds() / (metricValue(t, "convoy_observer_evaluation_cpu_seconds_total", nsA) / float64(evaluations(t, nsA)))
		t.Logf("B's reaction %d: %v, during %d of A's evaluations (%.1f times one of A's evaluations)", i, d.Round(time.Millisecond), n, units)
		if !long && (n > bound || units > float64(bound)) {
			t.Errorf("B's reaction %d took as long as %.0f of A's evaluations and waited for %d of them to finish; want at most %d (A's passes in flight hold %d)", i, units, n, bound, backlog)
		}
	}
	if long {
		t.Logf("B's reaction under A's load: p50 %v, max %v (%d flips)", percentile(bLoaded, 50), slices.Max(bLoaded), len(bLoaded))
	}
	// A converges: every Release of A is Healthy.
	deadline := 5 * time.Minute // a bound for "never starved", not a speed goal
	if long {
		deadline = 15 * time.Minute
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, deadline, true, func(context.Context) (bool, error) {
		for r := range shape.releases {
			if c := condition(t, nsA, fmt.Sprintf("a%d", r)); c == nil || c.Reason != v1alpha1.ReasonHealthy {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("team A's Releases did not converge within %v (starved?)", deadline)
	}
	aConverged := time.Since(start)
	cpu := processCPU() - cpu0
	t.Logf("A converged in %v; A's evaluations %d; process CPU %v over %v (%.0f%% of a core)",
		aConverged.Round(time.Second), evaluations(t, nsA), cpu.Round(time.Second), aConverged.Round(time.Second), 100*cpu.Seconds()/aConverged.Seconds())
	if long {
		p50, maxLoaded := percentile(bLoaded, 50), slices.Max(bLoaded)
		if p50 > 2*time.Second || maxLoaded > 5*time.Second {
			t.Errorf("B's reaction under A's load: p50 %v, max %v; want p50 ≤ 2s, max ≤ 5s", p50, maxLoaded)
		}
	}
}

// noisyRelease creates a Release re-checked every interval and its inventory, as the
// controller-manager would.
func noisyRelease(t *testing.T, ns, name string, interval time.Duration, entries []v1alpha1.InventoryEntry) {
	t.Helper()
	must(t, env.Client.Create(context.Background(), &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"},
			HealthAssessment: &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{}},
			SyncPolicy:       &v1alpha1.SyncPolicy{Interval: &metav1.Duration{Duration: interval}}},
	}))
	must(t, env.Client.Create(context.Background(), &v1alpha1.ReleaseInventory{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Entries: entries,
	}, client.FieldOwner("convoy-controller-manager")))
}

// startReplica starts an observer watching namespaces with default flags.
func startReplica(t *testing.T, namespaces ...string) func() {
	t.Helper()
	_, stop := startObserver(t, env.Config, options(func(o *observer.Options) { o.Management.Namespaces = namespaces }))
	return stop
}

// flipB turns B's ConfigMap not ready (i even) or ready (i odd) and waits until its
// inventory entry says so; it returns how long that took.
func flipB(t *testing.T, ns string, i int) time.Duration {
	t.Helper()
	ready, want := "false", v1alpha1.StateProgressing
	if i%2 == 1 {
		ready, want = "true", v1alpha1.StateHealthy
	}
	cm := &corev1.ConfigMap{}
	must(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, cm))
	cm.Data["ready"] = ready
	start := time.Now()
	must(t, env.Client.Update(context.Background(), cm))
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		inv := &v1alpha1.ReleaseInventory{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "b"}, inv); err != nil {
			return false, err
		}
		return len(inv.Entries) == 1 && inv.Entries[0].State == want, nil
	})
	if err != nil {
		t.Fatalf("B's entry never became %s after the flip to ready=%s: %v", want, ready, err)
	}
	return time.Since(start)
}

// evaluations returns how many rule evaluations the observers of this process have run
// for Releases of namespace (the sample count of convoy_observer_evaluation_wait_seconds).
func evaluations(t *testing.T, namespace string) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	must(t, err)
	for _, f := range families {
		if f.GetName() != "convoy_observer_evaluation_wait_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == namespace {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// metricValue returns the value of the counter name for namespace.
func metricValue(t *testing.T, name, namespace string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	must(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == namespace {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// processCPU is the CPU time of this process (the observer and the test's client).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)]
}
