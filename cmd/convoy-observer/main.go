// Command convoy-observer runs the observer loops of convoy (today the health loop,
// docs/design.md) in one controller-runtime manager, with leader election per
// shard, metrics and health probes. Logs go to stderr; --version prints the version,
// the commit and its date to stdout.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kumodo/convoy-observer/internal/clustercache"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kumodo/convoy-observer/internal/healthloop"
	"github.com/kumodo/convoy-observer/internal/observer"
	"github.com/kumodo/convoy-observer/internal/version"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var (
		o          observer.Options
		shards     stringList
		namespaces stringList
		qps        float64
		noSync     bool
		targetQPS  float64
		showVer    bool
	)
	fs := flag.CommandLine // controller-runtime registers --kubeconfig here
	fs.StringVar(&o.SyncURL, "sync-url", "", "base URL of convoy-api itself (e.g. https://127.0.0.1:8443) for the wake-ups (POST …/sync), with the observer's credentials; empty means through the kube-apiserver (the APIService)")
	fs.StringVar(&o.SyncCAFile, "sync-ca-file", "", "PEM CA of convoy-api's serving certificate, for an https --sync-url (default: the system roots)")
	fs.BoolVar(&noSync, "disable-sync", false, "send no wake-ups at all (the controller-manager then only sees its own resyncs)")
	fs.Var(&shards, "shard", "a shard this replica owns (repeatable); none means the default shard \"\"")
	fs.IntVar(&o.Workers, "workers", 64, "concurrent health passes (one Release is never synced twice at once); a pass reads from memory and waits on its writes")
	fs.Float64Var(&qps, "kube-api-qps", 300, "QPS of the management-cluster client: health writes (two per changed Release) and cache lists (docs/operations.md, \"Scaling and sizing\")")
	fs.IntVar(&o.Burst, "kube-api-burst", 600, "burst of the management-cluster client")
	fs.Float64Var(&targetQPS, "target-api-qps", 50, "QPS of each target cluster's client: the lists and watches of its informers, GETs of types it cannot watch")
	fs.IntVar(&o.TargetBurst, "target-api-burst", 200, "burst of each target cluster's client")
	fs.BoolVar(&o.DirectReads, "target-direct-reads", false, "read every target object with a GET on every pass instead of from watches")
	fs.IntVar(&o.TargetNamespaceThreshold, "target-watch-namespace-threshold", clustercache.DefaultNamespaceThreshold, "a resource type recorded in more namespaces of one target is watched with one informer for all namespaces instead of one per namespace")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", "address of the metrics endpoint (\"0\" disables it)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (\"0\" disables it)")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "address of net/http/pprof, for profiling (\"0\" disables it)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader among the replicas of the same shards (a Lease named convoy-observer-shard-default, or convoy-observer-shard-<shards>-<hash>)")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's namespace)")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before it takes over")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leading (less than the lease duration)")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "the interval of the replicas' attempts to acquire or renew the Lease")
	fs.DurationVar(&o.TargetTimeout, "target-timeout", clustercache.DefaultTimeout, "timeout of each request to a target cluster")
	fs.BoolVar(&o.Kubeconfig.AllowExec, "insecure-kubeconfig-exec", false, "let the kubeconfig Secret of a Cluster run a command in this pod for credentials (exec, auth-provider)")
	fs.BoolVar(&o.Kubeconfig.AllowFiles, "insecure-kubeconfig-files", false, "let the kubeconfig Secret of a Cluster read credentials from this pod's files (tokenFile, client-certificate, client-key), such as its service-account token")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", 30*time.Second, "timeout of each write and live read of the health loop on the management cluster (watches are not bounded)")
	fs.IntVar(&o.ReadConcurrency, "target-read-concurrency", healthloop.DefaultReadConcurrency, "concurrent object reads per Release pass")
	fs.BoolVar(&showVer, "version", false, "print the version, the commit and its date, and exit")
	fs.Int64Var(&o.PassBudget, "pass-evaluation-budget", int64(healthloop.DefaultPassBudget), "CEL cost units that the rules may spend in one pass over one Release (one expression may spend at most 1,000,000, about 0.1 s of CPU); entries not evaluated within it are Unknown until a later pass; 0 or less: no budget (docs/operations.md, \"Tenants and fairness\")")
	fs.IntVar(&o.EvaluationSlots, "evaluation-concurrency", 0, "rule evaluations running at once across all passes, served fairly across namespaces; 0: GOMAXPROCS (the cores the process may use)")
	fs.StringVar(&o.NamespaceWeightLabel, "namespace-weight-label", "", "label of a Namespace whose value (a positive number, default 1) weighs the namespace's share of the queue and of the evaluation CPU when namespaces compete; empty: all namespaces weigh the same (needs get, list, watch on namespaces)")
	fs.Var(&namespaces, "namespace", "watch only this namespace (repeatable); none means all namespaces")
	// Errors say why in their message; a stack trace only for a programming error.
	zopts := zap.Options{StacktraceLevel: zapcore.DPanicLevel}
	zopts.BindFlags(fs)
	flag.Parse()
	if showVer {
		fmt.Print(version.Line("convoy-observer"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts), zap.WriteTo(os.Stderr)))
	o.QPS, o.TargetQPS, o.Shards, o.Namespaces = float32(qps), float32(targetQPS), shards, namespaces
	if o.PassBudget == 0 {
		o.PassBudget = -1 // the flag's 0 is no budget; Options' 0 is the default
	}
	log := ctrl.Log.WithName("setup")
	if noSync && o.SyncURL != "" {
		log.Error(nil, "--disable-sync and --sync-url contradict each other")
		os.Exit(2)
	}
	if o.SyncCAFile != "" && o.SyncURL == "" {
		log.Error(nil, "--sync-ca-file needs --sync-url")
		os.Exit(2)
	}
	o.SyncThroughAPIServer = !noSync && o.SyncURL == ""

	ctx := ctrl.SetupSignalHandler()
	if o.LeaderElect && o.LeaderElectionNamespace == "" {
		if _, err := rest.InClusterConfig(); err != nil {
			log.Error(nil, "--leader-elect outside a cluster needs --leader-election-namespace (the namespace of the Lease)")
			os.Exit(2)
		}
	}
	cfg, err := loadConfig()
	if err != nil {
		log.Error(err, "loading the kubeconfig")
		os.Exit(1)
	}
	mgr, err := observer.New(ctx, cfg, o)
	if err != nil {
		log.Error(err, "setting up convoy-observer")
		os.Exit(1)
	}
	wake := "through the kube-apiserver " + cfg.Host
	switch {
	case noSync:
		wake = "disabled: the controller-manager will not be woken on edges"
	case o.SyncURL != "":
		wake = "directly at " + o.SyncURL
	}
	if o.LeaderElect {
		log.Info("starting; waiting to lead", "shards", o.Shards, "lease", observer.LeaseName(o.Shards), "wakeUps", wake)
	} else {
		log.Info("starting", "shards", o.Shards, "wakeUps", wake)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "convoy-observer stopped with an error")
		os.Exit(1)
	}
}

// loadConfig reads --kubeconfig, or, without it, the in-cluster config (both
// binaries fall back to it when --kubeconfig is absent), the
// same way as convoy-api: $KUBECONFIG and ~/.kube/config are not consulted.
func loadConfig() (*rest.Config, error) {
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		return ctrl.GetConfig()
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
	}
	return cfg, nil
}
