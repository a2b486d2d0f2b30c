// Package observer wires convoy-observer's loops into one controller-runtime manager:
// the cache, leader election per shard (a Lease named after the replica's shards), the
// target-cluster client cache, the sync-request client, probes and metrics. The command
// in cmd/convoy-observer only parses flags and calls New; tests call New to run real
// replicas side by side.
package observer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/fairshare"
	"github.com/kumodo/convoy-observer/internal/healthloop"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
	"github.com/kumodo/convoy-observer/internal/scheme"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// Options configure one observer replica. Zero values mean the defaults of the flags.
type Options struct {
	// SyncThroughAPIServer sends the wake-ups (POST …/releases/{name}/sync) to the
	// kube-apiserver of the config, which passes them to convoy-api through the
	// APIService, as the observer's own user (the command's default).
	SyncThroughAPIServer bool
	// SyncURL, when not empty, sends the wake-ups to convoy-api at this base URL
	// directly instead (tests, the demo), still with the observer's credentials.
	// Neither set: no wake-ups.
	SyncURL string
	// SyncCAFile is the PEM CA that signed convoy-api's serving certificate, for an https
	// SyncURL; "" means the system roots.
	SyncCAFile string
	// Shards are the shards this replica owns; none means the default shard "".
	Shards []string
	// Workers is the number of concurrent health passes (at least 1).
	Workers int
	// NamespaceWorkers bounds the concurrent passes of one namespace's Releases
	// (healthloop.HealthController.NamespaceWorkers); 0 means half of Workers (at least
	// 1), as for the flag.
	NamespaceWorkers int
	// QPS and Burst of the management client (reads come from the cache: this paces
	// the health writes and sync requests).
	QPS   float32
	Burst int
	// TargetQPS and TargetBurst of each target cluster's client (lists and watches of
	// the informers, GETs of types that cannot be watched); 0 means QPS and Burst.
	TargetQPS   float32
	TargetBurst int
	// DirectReads reads every target object with a GET on every pass instead of from
	// watches (the behaviour before the target cache; for comparison and debugging).
	DirectReads bool
	// TargetNamespaceThreshold: a type recorded in more namespaces of one target is
	// watched in all its namespaces with one informer (default
	// clustercache.DefaultNamespaceThreshold).
	TargetNamespaceThreshold int
	// MetricsAddr and ProbeAddr are the listen addresses; "0" disables them.
	MetricsAddr, ProbeAddr string
	// PprofAddr serves net/http/pprof (profiles of a slow converge); "" or "0" disables it.
	PprofAddr string
	// LeaderElect makes the replicas of the same shards elect a leader with a Lease.
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease (default: the pod's namespace).
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election (0:
	// DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// TargetTimeout bounds each request to a target cluster (default
	// clustercache.DefaultTimeout).
	TargetTimeout time.Duration
	// RequestTimeout bounds each write and live read of the loop on the management
	// cluster (default DefaultRequestTimeout), so a hung connection fails the pass (a retry) instead of
	// holding its worker forever. Watches are not bounded by it.
	RequestTimeout time.Duration
	// Kubeconfig says which credentials the kubeconfig Secret of a Cluster may use
	// (internal/kubeconfig: exec plugins and local files are refused by default).
	Kubeconfig kubeconfig.Options
	// DefaultServiceAccount is the ServiceAccount whose identity reads the objects of
	// a Cluster without kubeconfigSecretRef or serviceAccountName, in the Cluster's
	// namespace (default clustercache.DefaultServiceAccount); UnsafeReadAsObserver reads
	// them with the observer's own identity instead (clustercache.Options).
	DefaultServiceAccount string
	UnsafeReadAsObserver  bool
	// ReadConcurrency bounds the concurrent object reads of one pass.
	ReadConcurrency int
	// PassTimeout bounds the reads of one pass (healthloop.HealthController.PassTimeout):
	// 0 means no bound, as for the flag; nil means healthloop.DefaultPassTimeout.
	PassTimeout *time.Duration
	// PassBudget bounds the CEL cost of one pass over one Release, in CEL cost units
	// (healthloop.FairOptions.PassBudget): 0 means no budget, as for the flag and the
	// loop; nil means healthloop.DefaultPassBudget.
	PassBudget *uint64
	// EvaluationSlots bounds the rule evaluations in flight; 0 means GOMAXPROCS.
	EvaluationSlots int
	// NamespaceWeightLabel, when not "", is the label of a Namespace whose value (a
	// positive number) weighs the namespace's share of the queue and of the evaluation
	// CPU when namespaces compete; the observer then watches Namespaces' metadata.
	NamespaceWeightLabel string
	// Namespaces restricts the cache to these namespaces; none means all.
	Namespaces []string
	// WrapWriter wraps the client that the loop writes with (tests count writes).
	WrapWriter func(client.Client) client.Client
}

// syncTimeout bounds one wake-up request.
const syncTimeout = 10 * time.Second

// EventSource is the reportingController of the health loop's Events.
const EventSource = "convoy-observer"

// LeaseName returns the name of the Lease that the replicas owning shards compete for:
// convoy-observer-shard-default for the default shard alone; otherwise the sorted shard
// names, reduced to a DNS label of at most 24 characters, followed by the first 16 hex
// digits of the SHA-256 of the exact names (at most 63 characters in all), so two different shard sets (say "a-b" and
// {"a", "b"}, or "default" and the default shard) never share a Lease.
func LeaseName(shards []string) string {
	shards = healthloop.NewShardGate(shards).Shards() // sorted, de-duplicated; none => [""]
	if len(shards) == 1 && shards[0] == "" {
		return "convoy-observer-shard-default"
	}
	sum := sha256.Sum256([]byte(strings.Join(shards, "\x00")))
	name := strings.Trim(nonLabel.ReplaceAllString(strings.ToLower(strings.Join(shards, "-")), "-"), "-")
	if len(name) > 24 {
		name = strings.Trim(name[:24], "-")
	}
	if name == "" {
		name = "shard"
	}
	return fmt.Sprintf("convoy-observer-shard-%s-%x", name, sum[:8])
}

var nonLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// New returns a manager running the health loop, not yet started (call Start).
func New(ctx context.Context, cfg *rest.Config, o Options) (manager.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	if o.QPS > 0 {
		cfg.QPS = o.QPS
	}
	if o.Burst > 0 {
		cfg.Burst = o.Burst
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "0"
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = "0"
	}
	gate := healthloop.NewShardGate(o.Shards)
	opts := ctrl.Options{
		Scheme:                        scheme.New(),
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              LeaseName(gate.Shards()),
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// controller-runtime refuses a second controller of one name in a process (their
		// metrics would mix); a replica has one, but tests run replicas side by side.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	opts.LeaseDuration = ptr.To(cmp.Or(o.LeaseDuration, DefaultLeaseDuration))
	opts.RenewDeadline = ptr.To(cmp.Or(o.RenewDeadline, DefaultRenewDeadline))
	opts.RetryPeriod = ptr.To(cmp.Or(o.RetryPeriod, DefaultRetryPeriod))
	// The loop never reads the managedFields of Releases, Clusters or rule sets (it does
	// read the inventories': they say which entries the controller-manager records), so
	// the cache does not keep them.
	strip := cache.ByObject{Transform: cache.TransformStripManagedFields()}
	opts.Cache.ByObject = map[client.Object]cache.ByObject{
		&v1alpha1.Release{}: strip, &v1alpha1.Cluster{}: strip,
		&extv1alpha1.GlobalHealthRuleSet{}: strip, &extv1alpha1.HealthRuleSet{}: strip,
	}
	if len(o.Namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	secrets, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Secret client: %w", err)
	}
	if o.TargetQPS <= 0 {
		o.TargetQPS = o.QPS
	}
	if o.TargetBurst <= 0 {
		o.TargetBurst = o.Burst
	}
	// The loop's writes and live reads (the Release before a write, kubeconfig Secrets)
	// go straight to the API server through a client whose every request is bounded, so
	// a hung connection fails one pass (retried) instead of holding its worker forever;
	// the manager's watches are not bounded by it.
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	direct := rest.CopyConfig(cfg)
	direct.Timeout = o.RequestTimeout
	live, err := client.New(direct, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("creating the management client: %w", err)
	}
	clusters := clustercache.New(clustercache.Options{
		Local: cfg, SecretReader: live, Secrets: secrets,
		QPS: o.TargetQPS, Burst: o.TargetBurst, Timeout: o.TargetTimeout,
		Kubeconfig: o.Kubeconfig, DefaultServiceAccount: o.DefaultServiceAccount, UnsafeReadAsObserver: o.UnsafeReadAsObserver,
		Watch: !o.DirectReads, NamespaceThreshold: o.TargetNamespaceThreshold,
		Log: ctrl.Log.WithName("targets"),
	})
	// The manager stops the cache (its informers and Secret watches) at shutdown, after
	// the loop.
	if err := mgr.Add(clusters); err != nil {
		return nil, fmt.Errorf("adding the cluster cache to the manager: %w", err)
	}
	var waker healthloop.Waker
	switch wakeCfg := rest.CopyConfig(cfg); {
	case o.SyncURL != "":
		wakeCfg.Timeout = syncTimeout
		waker = syncapiclient.NewClient(syncapiclient.DirectConfig(wakeCfg, o.SyncURL, o.SyncCAFile))
	case o.SyncThroughAPIServer:
		wakeCfg.Timeout = syncTimeout
		waker = syncapiclient.NewClient(wakeCfg)
	}
	writer := client.Client(live)
	if o.WrapWriter != nil {
		writer = o.WrapWriter(writer)
	}
	h := healthloop.NewHealthController(mgr.GetCache(), writer, clusters, gate, waker)
	h.LiveReader = live
	h.NamespaceWorkers = o.NamespaceWorkers
	if o.PassTimeout != nil {
		h.PassTimeout = *o.PassTimeout
	}
	if o.ReadConcurrency > 0 {
		h.ReadConcurrency = o.ReadConcurrency
	}
	if o.PassBudget != nil {
		h.Fair.PassBudget = *o.PassBudget
	}
	h.Fair.Slots = o.EvaluationSlots
	if o.NamespaceWeightLabel != "" {
		if _, err := mgr.GetCache().GetInformer(ctx, fairshare.NamespaceMetadata()); err != nil {
			return nil, fmt.Errorf("watching Namespaces for --namespace-weight-label: %w", err)
		}
		h.Fair.Weight = fairshare.NamespaceWeights(ctx, mgr.GetCache(), o.NamespaceWeightLabel)
	}
	// Events (events.k8s.io/v1) through the manager's recorder: its broadcaster merges
	// repeats of one Event into a series.
	h.Events = mgr.GetEventRecorder(EventSource)
	if _, err := h.SetupWithManager(ctx, mgr, o.Workers); err != nil {
		return nil, fmt.Errorf("setting up the health loop: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}
