// Command convoy-observer runs the observer loops of convoy (today the health loop,
// spec/health-loop.txt) in one controller-runtime manager, with leader election per
// shard, metrics and health probes.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kumodo/convoy-observer/internal/controller/base"
	healthctrl "github.com/kumodo/convoy-observer/internal/controller/health"
	"github.com/kumodo/convoy-observer/internal/subresources"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
	syncURL          string
	shards           stringList
	workers          int
	qps              float64
	burst            int
	metricsAddr      string
	probeAddr        string
	leaderElect      bool
	leaderElectionNS string
	targetTimeout    time.Duration
	readConcurrency  int
}

func main() {
	var o options
	fs := flag.CommandLine // controller-runtime registers --kubeconfig here
	fs.StringVar(&o.syncURL, "sync-url", "", "base URL of convoy-api (e.g. http://127.0.0.1:8090) for POST …/sync; empty disables wake-ups")
	fs.Var(&o.shards, "shard", "a shard this replica owns (repeatable); none means the default shard \"\"")
	fs.IntVar(&o.workers, "workers", 4, "concurrent health passes (one Release is never synced twice at once)")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "QPS of each client (management and targets)")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "burst of each client (management and targets)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "address of the metrics endpoint (\"0\" disables it)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (\"0\" disables it)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader among the replicas of the same shards (Lease)")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "namespace of the Lease (default: the pod's namespace)")
	fs.DurationVar(&o.targetTimeout, "target-timeout", 10*time.Second, "timeout of each request to a target cluster")
	fs.IntVar(&o.readConcurrency, "target-read-concurrency", healthctrl.DefaultReadConcurrency, "concurrent object reads per Release pass")
	zopts := zap.Options{}
	zopts.BindFlags(fs)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts), zap.WriteTo(os.Stderr)))
	log := ctrl.Log.WithName("setup")
	if err := run(ctrl.SetupSignalHandler(), o, log); err != nil {
		log.Error(err, "convoy-observer failed")
		os.Exit(1)
	}
}

// leaseName returns the Lease name of a replica owning shards: one per shard set.
func leaseName(shards []string) string {
	name := "default"
	if len(shards) > 0 && !(len(shards) == 1 && shards[0] == "") {
		name = strings.Join(shards, "-")
	}
	name = regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(strings.ToLower(name), "-")
	name = strings.Trim(name, "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return "convoy-observer-shard-" + name
}

func run(ctx context.Context, o options, log logr.Logger) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	gate := base.NewShardGate(o.shards)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        testenv.NewScheme(),
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              leaseName(gate.Shards()),
		LeaderElectionNamespace:       o.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	clusters := base.NewClusterCache(base.ClusterCacheOptions{
		Local: cfg, SecretReader: mgr.GetAPIReader(),
		QPS: float32(o.qps), Burst: o.burst, Timeout: o.targetTimeout,
	})
	var waker healthctrl.Waker
	if o.syncURL != "" {
		waker = &subresources.Client{BaseURL: o.syncURL, HTTP: &http.Client{Timeout: 10 * time.Second}}
	} else {
		log.Info("no --sync-url: the controller-manager will not be woken on edges")
	}
	h := healthctrl.NewHealthController(mgr.GetCache(), mgr.GetClient(), clusters, gate, waker)
	h.ReadConcurrency = o.readConcurrency
	if _, err := h.SetupWithManager(ctx, mgr, o.workers); err != nil {
		return fmt.Errorf("setting up the health loop: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting", "shards", gate.Shards(), "syncURL", o.syncURL, "leaderElect", o.leaderElect)
	return mgr.Start(ctx)
}
