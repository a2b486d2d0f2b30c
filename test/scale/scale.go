// Package scale is the scale benchmark of convoy-observer (make bench-scale, and a
// small run in make test): on a fresh local control plane (kube-apiserver + etcd) it
// creates N Releases of M Deployments each (statuses written directly: no
// kube-controller-manager), starts a built convoy-observer binary and measures
//
//   - cold converge: observer start → every Release Healthy=True;
//   - API requests by verb and resource (kube-apiserver's apiserver_request_total)
//     during the converge and per steady minute;
//   - the observer's CPU time and peak RSS (/proc);
//   - the reaction time from a Deployment status change to its inventory entry state
//     and to the Release's Healthy condition (p50/p99/max over K changes, each one
//     turning an object unhealthy and back).
//
// The target cluster is the management cluster itself (a Cluster without
// kubeconfigSecretRef), so target and management requests are told apart by resource:
// deployments are target objects, releases and releaseinventories management ones.
//
// The fleet mode (Config.Clusters = C > 0) gives the Releases C remote Clusters instead,
// one per namespace, each with a kubeconfig Secret of its own user (a client
// certificate; all users reach the same local API server, with read access to the
// workloads through one group), so that each Cluster is a separate client, cache and
// set of watches, as C real target clusters would be. The report then adds what the
// fleet costs: open watches of target objects, the observer's goroutines, sockets and
// heap, per Cluster and per recorded object.
package scale

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// Config is one run.
type Config struct {
	// Releases (N), Objects per Release (M), Changes (K) measured for the reaction.
	Releases, Objects, Changes int
	// PerNamespace Releases share a namespace (and its Cluster); default 100. In the
	// fleet mode it is ceil(Releases / Clusters).
	PerNamespace int
	// Clusters is C of the fleet mode: C remote Clusters, one per namespace, each with
	// its own kubeconfig Secret and user; 0 (the default) makes every Release's Cluster
	// the management cluster.
	Clusters int
	// Steady is the window measured after the converge; default 60s.
	Steady time.Duration
	// Interval is each Release's syncPolicy.interval; default 30s.
	Interval time.Duration
	// ConvergeTimeout bounds the converge; default 10m.
	ConvergeTimeout time.Duration
	// ReactionTimeout bounds the wait for each reaction; default 30s.
	ReactionTimeout time.Duration
	// Rules is the rule selection: RulesDefaults (the default) or RulesLibrary.
	Rules string
	// Binary is the convoy-observer binary; Args are added to its flags.
	Binary string
	// Floor: Binary is test/scale/floorclient (BuildFloor), the least a health loop must
	// do (the spec's writes only, with the observer's concurrency and client settings);
	// the run ends after the converge (no steady window, no reactions: it does not watch
	// for them). Only without Clusters.
	Floor bool
	// Shards > 1 runs that many observers, one per shard ("" and s1, s2, …), the
	// namespaces' Clusters spread over them in turn; every process figure is their sum
	// (peak RSS: the sum of the peaks). Only with Clusters.
	Shards int
	Args   []string
	// CPUProfile > 0 takes a CPU profile of the (default shard's) process over the first
	// CPUProfile of the converge, written next to its log
	// (bench-scale-{observer,floor}-N<N>.cpu.pprof in the temporary directory), and its
	// heap profile once converged (….heap.pprof: every allocation until then).
	CPUProfile time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// The rule selections of Config.Rules. Every Release selects every GlobalHealthRuleSet,
// so the selection is what setup applies.
const (
	// RulesDefaults is health/convoy-defaults.yaml alone.
	RulesDefaults = "defaults"
	// RulesLibrary is convoy-defaults, every set of health/library and the generic set
	// (health/generic.yaml): hundreds of rules, wildcards included.
	RulesLibrary = "library"
)

func (c *Config) defaults() {
	if c.Rules == "" {
		c.Rules = RulesDefaults
	}
	if c.Clusters > 0 {
		c.PerNamespace = max(1, (c.Releases+c.Clusters-1)/c.Clusters)
	} else if c.PerNamespace <= 0 {
		c.PerNamespace = 100
	}
	if c.Steady <= 0 {
		c.Steady = time.Minute
	}
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	if c.ConvergeTimeout <= 0 {
		c.ConvergeTimeout = 10 * time.Minute
	}
	if c.ReactionTimeout <= 0 {
		c.ReactionTimeout = 30 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Build builds convoy-observer from the repository at root into dir and returns its path.
func Build(root, dir string) (string, error) {
	return build(root, dir, "convoy-observer", "./cmd/convoy-observer")
}

// BuildFloor builds test/scale/floorclient (Config.Floor) into dir and returns its path.
func BuildFloor(root, dir string) (string, error) {
	return build(root, dir, "floorclient", "./test/scale/floorclient")
}

func build(root, dir, name, pkg string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// run is the state of one Run.
type run struct {
	cfg    Config
	env    *testenv.Env
	c      client.Client
	cache  cache.Cache
	dir    string
	syncs  atomic.Int64
	report *Report
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, "bench-scale N=%d: %s\n", r.cfg.Releases, fmt.Sprintf(format, args...))
}

// Run does one run on a fresh control plane and returns its report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.Shards > 1 && (cfg.Clusters == 0 || cfg.Floor) {
		return nil, fmt.Errorf("shards: the fleet mode's Clusters are spread over the shards; want Clusters > 0 and no floor")
	}
	if cfg.Floor && cfg.Clusters > 0 {
		return nil, fmt.Errorf("the floor client judges the management cluster's Deployments only: no Clusters")
	}
	if cfg.Rules != RulesDefaults && cfg.Rules != RulesLibrary {
		return nil, fmt.Errorf("rules %q: want %q or %q", cfg.Rules, RulesDefaults, RulesLibrary)
	}
	// The kube-apiserver's watch-cache consistency check (on by default since
	// Kubernetes 1.34) lists every object of a cached type from etcd every few minutes;
	// at 100,000 Deployments that took a fifth of its CPU while it ran, in one run of a
	// pair and not in the other. It belongs to neither client measured, so the
	// benchmark's control plane runs without it.
	env, err := testenv.StartWith(testenv.Options{APIServerArgs: map[string]string{"feature-gates": "DetectCacheInconsistency=false"}})
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	dir, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfgFast := rest.CopyConfig(env.Config)
	cfgFast.QPS, cfgFast.Burst = 2000, 4000
	c, err := client.New(cfgFast, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, env: env, c: c, dir: dir, report: &Report{Config: cfg}}
	setupStart := time.Now()
	if err := r.setup(ctx); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	r.report.Setup = time.Since(setupStart)
	r.logf("created %d Releases × %d Deployments in %s", cfg.Releases, cfg.Objects, r.report.Setup.Round(time.Second))
	if err := r.watchManagement(ctx); err != nil {
		return nil, err
	}
	if err := r.measure(ctx); err != nil {
		return r.report, err
	}
	return r.report, nil
}

func (r *run) namespaces() int { return (r.cfg.Releases + r.cfg.PerNamespace - 1) / r.cfg.PerNamespace }

func (r *run) nsOf(i int) string { return fmt.Sprintf("bench-%d", i/r.cfg.PerNamespace) }
func relName(i int) string       { return fmt.Sprintf("r%d", i) }
func deployName(i, j int) string { return fmt.Sprintf("r%d-d%d", i, j) }
func (r *run) relKey(i int) client.ObjectKey {
	return client.ObjectKey{Namespace: r.nsOf(i), Name: relName(i)}
}

// watchManagement starts the benchmark's own cache of Releases and inventories (before
// the request counters are read, so its list and watch are not counted as the
// observer's).
func (r *run) watchManagement(ctx context.Context) error {
	ca, err := cache.New(r.env.Config, cache.Options{Scheme: r.env.Scheme})
	if err != nil {
		return err
	}
	for _, o := range []client.Object{&v1alpha1.Release{}, &v1alpha1.ReleaseInventory{}} {
		if _, err := ca.GetInformer(ctx, o); err != nil {
			return err
		}
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return fmt.Errorf("the benchmark's cache did not sync")
	}
	r.cache = ca
	return nil
}

// healthyReleases counts the Releases whose Healthy condition is True.
func (r *run) healthyReleases(ctx context.Context) (int, error) {
	var list v1alpha1.ReleaseList
	if err := r.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if c := meta.FindStatusCondition(list.Items[i].Status.Conditions, v1alpha1.ConditionHealthy); c != nil &&
			c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonHealthy {
			n++
		}
	}
	return n, nil
}

// measure starts the observer and takes every measurement.
func (r *run) measure(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rep := r.report
	before, err := apiRequests(ctx, r.env.Config)
	if err != nil {
		return err
	}
	start := time.Now()
	var procs observers
	defer func() { procs.stop() }() // the processes started below, not the empty list
	for shard := range max(r.cfg.Shards, 1) {
		p, err := r.startObserver(ctx, r.shardName(shard))
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	profiled := make(chan struct{})
	if r.cfg.CPUProfile > 0 {
		go func() { defer close(profiled); r.cpuProfile(ctx, procs[0].pprof) }()
	} else {
		close(profiled)
	}
	defer func() { <-profiled }()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, r.cfg.ConvergeTimeout, true, func(ctx context.Context) (bool, error) {
		if err := procs.exited(); err != nil {
			return false, err
		}
		n, err := r.healthyReleases(ctx)
		return n == r.cfg.Releases, err
	})
	if err != nil {
		n, _ := r.healthyReleases(ctx)
		r.copyLog()
		return fmt.Errorf("cold converge: %d of %d Releases Healthy after %s: %w", n, r.cfg.Releases, time.Since(start).Round(time.Second), err)
	}
	rep.Converge = time.Since(start)
	rep.Syncs = r.syncs.Load()
	afterConverge, err := apiRequests(ctx, r.env.Config)
	if err != nil {
		return err
	}
	rep.ConvergeRequests = afterConverge.minus(before)
	rep.APIServerCPUConverge = time.Duration(rep.ConvergeRequests[cpuKey] * float64(time.Second))
	rep.CPUConverge = procs.cpu()
	rep.RSSConverged = procs.status("VmRSS")
	rep.Objects = r.cfg.Releases * r.cfg.Objects
	rep.Namespaces = r.namespaces()
	rep.TargetWatches = afterConverge["WATCH (open) deployments"]
	rep.Sockets = procs.sockets()
	pr := procs.process(ctx)
	rep.Goroutines, rep.HeapInuse, rep.Passes = pr.goroutines, pr.heapInuse, pr.passes
	rep.ConvergeReads = procs.reads(ctx)
	r.logf("converged in %s", rep.Converge.Round(time.Millisecond))
	if r.cfg.CPUProfile > 0 {
		r.allocsProfile(ctx, procs[0].pprof)
	}
	if r.cfg.Floor {
		rep.PeakRSS = procs.status("VmHWM")
		r.copyLog()
		return nil
	}

	// Steady window: nothing changes; the re-check timer (syncPolicy.interval) fires.
	cpu0 := procs.cpu()
	reads0 := procs.reads(ctx)
	req0, err := apiRequests(ctx, r.env.Config)
	if err != nil {
		return err
	}
	select {
	case <-time.After(r.cfg.Steady):
	case <-ctx.Done():
		return ctx.Err()
	}
	req1, err := apiRequests(ctx, r.env.Config)
	if err != nil {
		return err
	}
	cpu1 := procs.cpu()
	reads1 := procs.reads(ctx)
	rep.SteadyWindow = r.cfg.Steady
	rep.SteadyRequests = req1.minus(req0)
	rep.CPUSteady = cpu1 - cpu0
	rep.SteadyReads = reads1.minus(reads0)
	rep.HeapLive = procs.liveHeap(ctx)
	r.logf("steady window of %s done", r.cfg.Steady)

	// Reactions.
	rng := rand.New(rand.NewPCG(uint64(r.cfg.Releases), uint64(r.cfg.Objects)))
	for k := 0; k < r.cfg.Changes; k++ {
		i, j := rng.IntN(r.cfg.Releases), rng.IntN(r.cfg.Objects)
		for _, ready := range []bool{false, true} {
			e, c, err := r.react(ctx, i, j, ready)
			if err != nil {
				r.copyLog()
				return err
			}
			rep.EntryReaction = append(rep.EntryReaction, e)
			rep.ConditionReaction = append(rep.ConditionReaction, c)
		}
	}
	rep.CPUTotal = procs.cpu()
	rep.PeakRSS = procs.status("VmHWM")
	r.logf("%d reactions measured", len(rep.EntryReaction))
	r.copyLog()
	return nil
}

// react changes Deployment j of Release i to ready (or not) and returns how long the
// entry's state and the Release's Healthy condition took to follow.
func (r *run) react(ctx context.Context, i, j int, ready bool) (entry, cond time.Duration, err error) {
	d := &appsv1.Deployment{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.nsOf(i), Name: deployName(i, j)}, d); err != nil {
		return 0, 0, err
	}
	wantState, wantCond := v1alpha1.StateProgressing, metav1.ConditionFalse
	if ready {
		wantState, wantCond = v1alpha1.StateHealthy, metav1.ConditionTrue
	}
	start := time.Now()
	if err := r.setStatus(ctx, d, ready); err != nil {
		return 0, 0, err
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, r.cfg.ReactionTimeout, true, func(ctx context.Context) (bool, error) {
		if entry == 0 {
			inv := &v1alpha1.ReleaseInventory{}
			if err := r.cache.Get(ctx, r.relKey(i), inv, client.UnsafeDisableDeepCopy); err != nil {
				return false, err
			}
			for _, e := range inv.Entries {
				if e.Name == d.Name && e.State == wantState {
					entry = time.Since(start)
				}
			}
		}
		if cond == 0 {
			rel := &v1alpha1.Release{}
			if err := r.cache.Get(ctx, r.relKey(i), rel, client.UnsafeDisableDeepCopy); err != nil {
				return false, err
			}
			if c := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy); c != nil && c.Status == wantCond {
				cond = time.Since(start)
			}
		}
		return entry > 0 && cond > 0, nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("reaction to %s/%s ready=%v not seen within %s (entry after %s, condition after %s): %w",
			d.Namespace, d.Name, ready, r.cfg.ReactionTimeout, entry, cond, err)
	}
	return entry, cond, nil
}
