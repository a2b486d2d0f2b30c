package observer

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/healthloop"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
)

// Defaults of the flags that New also applies to a zero Options field.
const (
	// DefaultRequestTimeout bounds each write and live read on the management cluster
	// (--request-timeout).
	DefaultRequestTimeout = 30 * time.Second
	// DefaultLeaseDuration, DefaultRenewDeadline and DefaultRetryPeriod tune leader
	// election (--leader-elect-lease-duration, -renew-deadline, -retry-period).
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Flags are the command-line options of convoy-observer, one group per concern, each
// with its defaults and its BindFlags (as Flux's controllers group theirs). Options
// turns them into the Options of New.
type Flags struct {
	WakeUps        WakeUpFlags
	LeaderElection LeaderElectionFlags
	Management     ManagementFlags
	Targets        TargetFlags
	Evaluation     EvaluationFlags
	Serving        ServingFlags
}

// BindFlags defines every group's flags on fs.
func (f *Flags) BindFlags(fs *pflag.FlagSet) {
	f.WakeUps.BindFlags(fs)
	f.Management.BindFlags(fs)
	f.Targets.BindFlags(fs)
	f.Serving.BindFlags(fs)
	f.LeaderElection.BindFlags(fs)
	f.Evaluation.BindFlags(fs)
}

// WakeUpFlags say where the wake-ups (POST …/releases/{name}/sync) go.
type WakeUpFlags struct {
	SyncURL    string
	SyncCAFile string
	Disable    bool
}

// BindFlags defines --sync-url, --sync-ca-file and --disable-sync.
func (f *WakeUpFlags) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.SyncURL, "sync-url", "", "base URL of convoy-api itself (e.g. https://127.0.0.1:8443) for the wake-ups (POST …/sync), with the observer's credentials; empty means through the kube-apiserver (the APIService)")
	fs.StringVar(&f.SyncCAFile, "sync-ca-file", "", "PEM CA of convoy-api's serving certificate, for an https --sync-url (default: the system roots)")
	fs.BoolVar(&f.Disable, "disable-sync", false, "send no wake-ups at all (the controller-manager then only sees its own resyncs)")
}

// LeaderElectionFlags tune the Lease of the replicas of the same shards.
type LeaderElectionFlags struct {
	Enable                                    bool
	Namespace                                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// BindFlags defines --leader-elect and --leader-election-namespace and the three
// durations.
func (f *LeaderElectionFlags) BindFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.Enable, "leader-elect", false, "elect a leader among the replicas of the same shards (a Lease named convoy-observer-shard-default, or convoy-observer-shard-<shards>-<hash>)")
	fs.StringVar(&f.Namespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's namespace)")
	fs.DurationVar(&f.LeaseDuration, "leader-elect-lease-duration", DefaultLeaseDuration, "how long a standby waits after the leader's last renewal before it takes over")
	fs.DurationVar(&f.RenewDeadline, "leader-elect-renew-deadline", DefaultRenewDeadline, "how long the leader retries renewing before it gives up leading (less than the lease duration)")
	fs.DurationVar(&f.RetryPeriod, "leader-elect-retry-period", DefaultRetryPeriod, "the interval of the replicas' attempts to acquire or renew the Lease")
}

// ManagementFlags configure the work on the management cluster: what this replica
// watches, how many passes run and the client's limits.
type ManagementFlags struct {
	Shards, Namespaces []string
	Workers            int
	NamespaceWorkers   int
	QPS                float64
	Burst              int
	RequestTimeout     time.Duration
}

// BindFlags defines --shard, --namespace, --workers, --kube-api-qps, --kube-api-burst
// and --request-timeout.
func (f *ManagementFlags) BindFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.Shards, "shard", nil, "a shard this replica owns (repeatable); none means the default shard \"\"")
	fs.StringArrayVar(&f.Namespaces, "namespace", nil, "watch only this namespace (repeatable); none means all namespaces")
	fs.IntVar(&f.Workers, "workers", 64, "concurrent health passes (one Release is never synced twice at once); a pass reads from memory and waits on its writes")
	fs.IntVar(&f.NamespaceWorkers, "namespace-workers", 0, "concurrent health passes of the Releases of one namespace, so that one tenant whose cluster answers slowly cannot hold every worker; 0: half of --workers (at least 1)")
	fs.Float64Var(&f.QPS, "kube-api-qps", 300, "QPS of the management-cluster client: health writes (two per changed Release) and cache lists (docs/operations.md, \"Scaling and sizing\")")
	fs.IntVar(&f.Burst, "kube-api-burst", 600, "burst of the management-cluster client")
	fs.DurationVar(&f.RequestTimeout, "request-timeout", DefaultRequestTimeout, "timeout of each write and live read of the health loop on the management cluster (watches are not bounded)")
}

// TargetFlags configure the clients and caches of the target clusters.
type TargetFlags struct {
	QPS                float64
	Burst              int
	DirectReads        bool
	NamespaceThreshold int
	Timeout            time.Duration
	ReadConcurrency    int
	PassTimeout        time.Duration
	Kubeconfig         kubeconfig.Options
	// DefaultServiceAccount and UnsafeReadAsObserver: the read identity
	// (docs/security.md, "Read identity").
	DefaultServiceAccount string
	UnsafeReadAsObserver  bool
}

// BindFlags defines the --target-* flags and the --insecure-kubeconfig-* flags shared
// with convoy-api.
func (f *TargetFlags) BindFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&f.QPS, "target-api-qps", 50, "QPS of each target cluster's client: the lists and watches of its informers, GETs of types it cannot watch")
	fs.IntVar(&f.Burst, "target-api-burst", 200, "burst of each target cluster's client")
	fs.BoolVar(&f.DirectReads, "target-direct-reads", false, "read every target object with a GET on every pass instead of from watches")
	fs.IntVar(&f.NamespaceThreshold, "target-watch-namespace-threshold", clustercache.DefaultNamespaceThreshold, "a resource type recorded in more namespaces of one target is watched with one informer for all namespaces instead of one per namespace")
	fs.DurationVar(&f.Timeout, "target-timeout", clustercache.DefaultTimeout, "timeout of each request to a target cluster")
	fs.IntVar(&f.ReadConcurrency, "target-read-concurrency", healthloop.DefaultReadConcurrency, "concurrent object reads per Release pass")
	fs.DurationVar(&f.PassTimeout, "pass-timeout", healthloop.DefaultPassTimeout, "how long the reads of one Release pass may take: a pass whose target answers too slowly for its inventory stops there, its Healthy condition says so (Unknown), and its worker goes to other Releases; 0: no bound")
	fs.StringVar(&f.DefaultServiceAccount, "default-service-account", clustercache.DefaultServiceAccount, "the ServiceAccount, in the Cluster's namespace, whose identity (impersonated) reads the objects of a Cluster without kubeconfigSecretRef or spec.serviceAccountName (docs/security.md)")
	fs.BoolVar(&f.UnsafeReadAsObserver, "unsafe-read-as-observer", false, "UNSAFE on a shared cluster: read the objects of a Cluster without kubeconfigSecretRef or spec.serviceAccountName with the observer's own identity instead of --default-service-account, so anyone who may write a Release reads through the observer what the observer may read")
	f.Kubeconfig.BindFlags(fs)
}

// EvaluationFlags bound and share the CPU that the rules spend.
type EvaluationFlags struct {
	PassBudget           uint64
	Slots                int
	NamespaceWeightLabel string
}

// BindFlags defines --pass-evaluation-budget, --evaluation-concurrency and
// --namespace-weight-label.
func (f *EvaluationFlags) BindFlags(fs *pflag.FlagSet) {
	fs.Uint64Var(&f.PassBudget, "pass-evaluation-budget", healthloop.DefaultPassBudget, "CEL cost units that the rules may spend in one pass over one Release (one expression may spend at most 1,000,000, about 0.1 s of CPU); entries not evaluated within it are Unknown until a later pass; 0: no budget (docs/operations.md, \"Tenants and fairness\")")
	fs.IntVar(&f.Slots, "evaluation-concurrency", 0, "rule evaluations running at once across all passes, served fairly across namespaces; 0: GOMAXPROCS (the cores the process may use)")
	fs.StringVar(&f.NamespaceWeightLabel, "namespace-weight-label", "", "label of a Namespace whose value (a positive number, default 1) weighs the namespace's share of the queue and of the evaluation CPU when namespaces compete; empty: all namespaces weigh the same (needs get, list, watch on namespaces)")
}

// ServingFlags are the listen addresses of metrics, probes and pprof.
type ServingFlags struct {
	MetricsAddr, ProbeAddr, PprofAddr string
}

// BindFlags defines --metrics-bind-address, --health-probe-bind-address and
// --pprof-bind-address.
func (f *ServingFlags) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", "0", "address of the metrics endpoint (\"0\" disables it)")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (\"0\" disables it)")
	fs.StringVar(&f.PprofAddr, "pprof-bind-address", "0", "address of net/http/pprof, for profiling (\"0\" disables it)")
}

// Options returns the Options of New, or a usage error when flags contradict each
// other (--disable-sync with --sync-url, --sync-ca-file without --sync-url) or a value
// does not parse (--default-service-account, --target-server-allowlist).
func (f *Flags) Options() (Options, error) {
	if f.WakeUps.Disable && f.WakeUps.SyncURL != "" {
		return Options{}, errors.New("--disable-sync and --sync-url contradict each other")
	}
	if f.WakeUps.SyncCAFile != "" && f.WakeUps.SyncURL == "" {
		return Options{}, errors.New("--sync-ca-file needs --sync-url")
	}
	if errs := validation.IsDNS1123Subdomain(f.Targets.DefaultServiceAccount); len(errs) > 0 {
		return Options{}, fmt.Errorf("--default-service-account %q is no ServiceAccount name: %s", f.Targets.DefaultServiceAccount, strings.Join(errs, "; "))
	}
	if f.Management.NamespaceWorkers < 0 {
		return Options{}, fmt.Errorf("--namespace-workers %d: must not be negative", f.Management.NamespaceWorkers)
	}
	if err := f.Targets.Kubeconfig.Validate(); err != nil {
		return Options{}, err
	}
	budget := f.Evaluation.PassBudget
	return Options{
		SyncThroughAPIServer:     !f.WakeUps.Disable && f.WakeUps.SyncURL == "",
		SyncURL:                  f.WakeUps.SyncURL,
		SyncCAFile:               f.WakeUps.SyncCAFile,
		Shards:                   f.Management.Shards,
		Namespaces:               f.Management.Namespaces,
		Workers:                  f.Management.Workers,
		NamespaceWorkers:         f.Management.NamespaceWorkers,
		QPS:                      float32(f.Management.QPS),
		Burst:                    f.Management.Burst,
		RequestTimeout:           f.Management.RequestTimeout,
		TargetQPS:                float32(f.Targets.QPS),
		TargetBurst:              f.Targets.Burst,
		DirectReads:              f.Targets.DirectReads,
		TargetNamespaceThreshold: f.Targets.NamespaceThreshold,
		TargetTimeout:            f.Targets.Timeout,
		ReadConcurrency:          f.Targets.ReadConcurrency,
		PassTimeout:              &f.Targets.PassTimeout,
		Kubeconfig:               f.Targets.Kubeconfig,
		DefaultServiceAccount:    f.Targets.DefaultServiceAccount,
		UnsafeReadAsObserver:     f.Targets.UnsafeReadAsObserver,
		MetricsAddr:              f.Serving.MetricsAddr,
		ProbeAddr:                f.Serving.ProbeAddr,
		PprofAddr:                f.Serving.PprofAddr,
		LeaderElect:              f.LeaderElection.Enable,
		LeaderElectionNamespace:  f.LeaderElection.Namespace,
		LeaseDuration:            f.LeaderElection.LeaseDuration,
		RenewDeadline:            f.LeaderElection.RenewDeadline,
		RetryPeriod:              f.LeaderElection.RetryPeriod,
		PassBudget:               &budget,
		EvaluationSlots:          f.Evaluation.Slots,
		NamespaceWeightLabel:     f.Evaluation.NamespaceWeightLabel,
	}, nil
}
