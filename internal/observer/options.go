package observer

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	leaderelectionflags "k8s.io/component-base/config/options"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/healthloop"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
)

// Options configure one observer replica: one group per concern, each with its flags
// (AddFlags, one section of --help each) and consumed as it is by New, as Flux's
// controllers and kube-controller-manager take their option groups. NewOptions gives
// the defaults of the flags; a zero field means what its flag's help says for 0 or "",
// and New applies no other default.
type Options struct {
	WakeUps WakeUpOptions
	// LeaderElection is component-base's group (the flags of kube-controller-manager:
	// --leader-elect, --leader-elect-lease-duration, -renew-deadline, -retry-period,
	// -resource-namespace, -resource-name, -resource-lock). An empty ResourceName means
	// the Lease of the replica's shards (LeaseName); ResourceLock must be "leases".
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	Management     ManagementOptions
	Targets        TargetOptions
	Evaluation     EvaluationOptions
	Serving        ServingOptions

	// WrapWriter, when not nil, wraps the client that the loop writes with (tests count
	// writes). No flag sets it.
	WrapWriter func(client.Client) client.Client
}

// DefaultRequestTimeout bounds each write and live read on the management cluster
// (--request-timeout).
const DefaultRequestTimeout = 30 * time.Second

// NewOptions returns the defaults of the flags.
func NewOptions() *Options {
	return &Options{
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaseDuration: metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:   metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:  "leases",
		},
		Management: ManagementOptions{
			Workers: 64, QPS: 300, Burst: 600, RequestTimeout: DefaultRequestTimeout,
		},
		Targets: TargetOptions{
			QPS: 50, Burst: 200,
			NamespaceThreshold:    clustercache.DefaultNamespaceThreshold,
			Timeout:               clustercache.DefaultTimeout,
			ReadConcurrency:       healthloop.DefaultReadConcurrency,
			PassTimeout:           healthloop.DefaultPassTimeout,
			DefaultServiceAccount: clustercache.DefaultServiceAccount,
		},
		Evaluation: EvaluationOptions{PassBudget: healthloop.DefaultPassBudget},
		Serving:    ServingOptions{MetricsAddr: "0", ProbeAddr: ":8081", PprofAddr: "0"},
	}
}

// AddFlags defines every group's flags, each group in its own section of fss (the
// sections of --help).
func (o *Options) AddFlags(fss *cliflag.NamedFlagSets) {
	o.Management.AddFlags(fss.FlagSet("management cluster"))
	o.WakeUps.AddFlags(fss.FlagSet("wake-ups"))
	o.Targets.AddFlags(fss.FlagSet("target clusters"))
	o.Evaluation.AddFlags(fss.FlagSet("evaluation"))
	o.Serving.AddFlags(fss.FlagSet("serving"))
	le := fss.FlagSet("leader election")
	leaderelectionflags.BindLeaderElectionFlags(&o.LeaderElection, le)
	// The name that this project's manifests used before it took component-base's group.
	le.StringVar(&o.LeaderElection.ResourceNamespace, "leader-election-namespace", o.LeaderElection.ResourceNamespace, "namespace of the Lease")
	_ = le.MarkDeprecated("leader-election-namespace", "use --leader-elect-resource-namespace")
}

// Validate returns every usage error of the options: flags that contradict each other
// (--disable-sync with --sync-url, --sync-ca-file without --sync-url), values out of
// range, a --default-service-account that is no ServiceAccount name, an unparsable
// --target-server-allowlist, and --leader-elect outside a cluster without the Lease's
// namespace.
func (o *Options) Validate() error {
	var errs []error
	w, m, t, le := o.WakeUps, o.Management, o.Targets, o.LeaderElection
	if w.Disable && w.SyncURL != "" {
		errs = append(errs, errors.New("--disable-sync and --sync-url contradict each other"))
	}
	if w.SyncCAFile != "" && w.SyncURL == "" {
		errs = append(errs, errors.New("--sync-ca-file needs --sync-url"))
	}
	if m.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers %d: must be at least 1", m.Workers))
	}
	if m.NamespaceWorkers < 0 {
		errs = append(errs, fmt.Errorf("--namespace-workers %d: must not be negative", m.NamespaceWorkers))
	}
	if m.QPS <= 0 || m.Burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps %g and --kube-api-burst %d: must be positive", m.QPS, m.Burst))
	}
	if t.QPS < 0 || t.Burst < 0 {
		errs = append(errs, fmt.Errorf("--target-api-qps %g and --target-api-burst %d: must not be negative", t.QPS, t.Burst))
	}
	if m.RequestTimeout < 0 || t.Timeout < 0 || t.PassTimeout < 0 {
		errs = append(errs, errors.New("--request-timeout, --target-timeout and --pass-timeout must not be negative"))
	}
	if t.ReadConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--target-read-concurrency %d: must be at least 1", t.ReadConcurrency))
	}
	if t.NamespaceThreshold < 0 {
		errs = append(errs, fmt.Errorf("--target-watch-namespace-threshold %d: must not be negative", t.NamespaceThreshold))
	}
	if msgs := validation.IsDNS1123Subdomain(t.DefaultServiceAccount); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--default-service-account %q is no ServiceAccount name: %s", t.DefaultServiceAccount, strings.Join(msgs, "; ")))
	}
	if err := t.Kubeconfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Evaluation.Slots < 0 {
		errs = append(errs, fmt.Errorf("--evaluation-concurrency %d: must not be negative", o.Evaluation.Slots))
	}
	if le.ResourceLock != "leases" {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock %q: only leases is supported", le.ResourceLock))
	}
	if le.LeaderElect {
		if le.LeaseDuration.Duration <= le.RenewDeadline.Duration || le.RenewDeadline.Duration <= 0 || le.RetryPeriod.Duration <= 0 {
			errs = append(errs, errors.New("leader election needs --leader-elect-lease-duration > --leader-elect-renew-deadline > 0 and a positive --leader-elect-retry-period"))
		}
		if le.ResourceNamespace == "" {
			if _, err := rest.InClusterConfig(); err != nil {
				errs = append(errs, errors.New("--leader-elect outside a cluster needs --leader-elect-resource-namespace (the namespace of the Lease)"))
			}
		}
	}
	return errors.Join(errs...)
}

// WakeUpOptions say where the wake-ups (POST …/releases/{name}/sync) go: through the
// kube-apiserver (the APIService) by default, at SyncURL directly, or nowhere.
type WakeUpOptions struct {
	SyncURL    string
	SyncCAFile string
	Disable    bool
}

// AddFlags defines --sync-url, --sync-ca-file and --disable-sync.
func (f *WakeUpOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.SyncURL, "sync-url", f.SyncURL, "base URL of convoy-api itself (e.g. https://127.0.0.1:8443) for the wake-ups (POST …/sync), with the observer's credentials; empty: through the kube-apiserver (the APIService)")
	fs.StringVar(&f.SyncCAFile, "sync-ca-file", f.SyncCAFile, "PEM CA of convoy-api's serving certificate, for an https --sync-url; empty: the system roots")
	fs.BoolVar(&f.Disable, "disable-sync", f.Disable, "send no wake-ups at all (the controller-manager then only sees its own resyncs)")
}

// ManagementOptions configure the work on the management cluster: its kubeconfig, what
// this replica watches, how many passes run and the client's limits.
type ManagementOptions struct {
	// Kubeconfig is read by the command (ownconfig.Load); New takes the loaded config.
	Kubeconfig         string
	Shards, Namespaces []string
	Workers            int
	NamespaceWorkers   int
	QPS                float32
	Burst              int
	RequestTimeout     time.Duration
}

// AddFlags defines --kubeconfig, --shard, --namespace, --workers, --namespace-workers,
// --kube-api-qps, --kube-api-burst and --request-timeout.
func (f *ManagementOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig, "kubeconfig file of the management cluster (its current context); empty: the in-cluster config ($KUBECONFIG and ~/.kube/config are not read)")
	fs.StringArrayVar(&f.Shards, "shard", f.Shards, "a shard this replica owns (repeatable); none: the default shard \"\"")
	fs.StringArrayVar(&f.Namespaces, "namespace", f.Namespaces, "watch only this namespace (repeatable); none: all namespaces")
	fs.IntVar(&f.Workers, "workers", f.Workers, "concurrent health passes, at least 1 (one Release is never synced twice at once); a pass reads from memory and waits on its writes")
	fs.IntVar(&f.NamespaceWorkers, "namespace-workers", f.NamespaceWorkers, "concurrent health passes of the Releases of one namespace, so that one tenant whose cluster answers slowly cannot hold every worker; 0: half of --workers (at least 1)")
	fs.Float32Var(&f.QPS, "kube-api-qps", f.QPS, "QPS of the management-cluster client, positive: health writes (two per changed Release) and cache lists (docs/operations.md, \"Scaling and sizing\")")
	fs.IntVar(&f.Burst, "kube-api-burst", f.Burst, "burst of the management-cluster client, positive")
	fs.DurationVar(&f.RequestTimeout, "request-timeout", f.RequestTimeout, "timeout of each write and live read of the health loop on the management cluster (watches are not bounded); 0: no bound")
}

// TargetOptions configure the clients and caches of the target clusters (clustercache.Options).
type TargetOptions struct {
	QPS                float32
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

// AddFlags defines the --target-* flags, --pass-timeout, the read identity's flags
// and the --insecure-kubeconfig-* flags shared with convoy-api.
func (f *TargetOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Float32Var(&f.QPS, "target-api-qps", f.QPS, "QPS of each target cluster's client: the lists and watches of its informers, GETs of types it cannot watch; 0: --kube-api-qps")
	fs.IntVar(&f.Burst, "target-api-burst", f.Burst, "burst of each target cluster's client; 0: --kube-api-burst")
	fs.BoolVar(&f.DirectReads, "target-direct-reads", f.DirectReads, "read every target object with a GET on every pass instead of from watches")
	fs.IntVar(&f.NamespaceThreshold, "target-watch-namespace-threshold", f.NamespaceThreshold, "a resource type recorded in more namespaces of one target is watched with one informer for all namespaces instead of one per namespace; 0: always one informer for all namespaces")
	fs.DurationVar(&f.Timeout, "target-timeout", f.Timeout, "timeout of each request to a target cluster; 0: no bound")
	fs.IntVar(&f.ReadConcurrency, "target-read-concurrency", f.ReadConcurrency, "concurrent object reads per Release pass, at least 1")
	fs.DurationVar(&f.PassTimeout, "pass-timeout", f.PassTimeout, "how long the reads of one Release pass may take: a pass whose target answers too slowly for its inventory stops there, its Healthy condition says so (Unknown), and its worker goes to other Releases; 0: no bound")
	fs.StringVar(&f.DefaultServiceAccount, "default-service-account", f.DefaultServiceAccount, "the ServiceAccount, in the Cluster's namespace, whose identity (impersonated) reads the objects of a Cluster without kubeconfigSecretRef or spec.serviceAccountName (docs/security.md)")
	fs.BoolVar(&f.UnsafeReadAsObserver, "unsafe-read-as-observer", f.UnsafeReadAsObserver, "UNSAFE on a shared cluster: read the objects of a Cluster without kubeconfigSecretRef or spec.serviceAccountName with the observer's own identity instead of --default-service-account, so anyone who may write a Release reads through the observer what the observer may read")
	f.Kubeconfig.BindFlags(fs)
}

// EvaluationOptions bound and share the CPU that the rules spend (healthloop.FairOptions).
type EvaluationOptions struct {
	PassBudget           uint64
	Slots                int
	NamespaceWeightLabel string
}

// AddFlags defines --pass-evaluation-budget, --evaluation-concurrency and
// --namespace-weight-label.
func (f *EvaluationOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Uint64Var(&f.PassBudget, "pass-evaluation-budget", f.PassBudget, "CEL cost units that the rules may spend in one pass over one Release (one expression may spend at most 1,000,000, about 0.1 s of CPU); entries not evaluated within it are Unknown until a later pass; 0: no budget (docs/operations.md, \"Tenants and fairness\")")
	fs.IntVar(&f.Slots, "evaluation-concurrency", f.Slots, "rule evaluations running at once across all passes, served fairly across namespaces; 0: GOMAXPROCS (the cores the process may use)")
	fs.StringVar(&f.NamespaceWeightLabel, "namespace-weight-label", f.NamespaceWeightLabel, "label of a Namespace whose value (a positive number, default 1) weighs the namespace's share of the queue and of the evaluation CPU when namespaces compete; empty: all namespaces weigh the same (needs get, list, watch on namespaces)")
}

// ServingOptions are the listen addresses of metrics, probes and pprof.
type ServingOptions struct {
	MetricsAddr, ProbeAddr, PprofAddr string
}

// AddFlags defines --metrics-bind-address, --health-probe-bind-address and
// --pprof-bind-address.
func (f *ServingOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", f.MetricsAddr, "address of the metrics endpoint; \"0\": disabled, empty: controller-runtime's :8080")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", f.ProbeAddr, "address of /healthz and /readyz; \"0\" or empty: disabled")
	fs.StringVar(&f.PprofAddr, "pprof-bind-address", f.PprofAddr, "address of net/http/pprof, for profiling; \"0\" or empty: disabled")
}
