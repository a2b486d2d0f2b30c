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
	"k8s.io/client-go/util/flowcontrol"
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
	"github.com/kumodo/convoy-observer/internal/inventory"
	"github.com/kumodo/convoy-observer/internal/metaapply"
	"github.com/kumodo/convoy-observer/internal/scheme"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

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

// New returns a manager running the health loop, not yet started (call Start), or the
// error of o.Validate. cfg is the management cluster's config (the command loads it
// from o.Management.Kubeconfig); o is consumed as it is, without other defaults.
func New(ctx context.Context, cfg *rest.Config, o *Options) (manager.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	m, t, le := o.Management, o.Targets, o.LeaderElection
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = m.QPS, m.Burst
	gate := healthloop.NewShardGate(m.Shards)
	opts := ctrl.Options{
		Scheme:                        scheme.New(),
		Metrics:                       metricsserver.Options{BindAddress: o.Serving.MetricsAddr},
		HealthProbeBindAddress:        o.Serving.ProbeAddr,
		PprofBindAddress:              o.Serving.PprofAddr,
		LeaderElection:                le.LeaderElect,
		LeaderElectionID:              cmp.Or(le.ResourceName, LeaseName(gate.Shards())),
		LeaderElectionNamespace:       le.ResourceNamespace,
		LeaderElectionResourceLock:    le.ResourceLock,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration.Duration,
		RenewDeadline:                 &le.RenewDeadline.Duration,
		RetryPeriod:                   &le.RetryPeriod.Duration,
		// controller-runtime refuses a second controller of one name in a process (their
		// metrics would mix); a replica has one, but tests run replicas side by side.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	// The loop never reads the managedFields of Releases, Clusters or rule sets (it does
	// read the inventories': they say which entries the controller-manager records), so
	// the cache does not keep them.
	strip := cache.ByObject{Transform: cache.TransformStripManagedFields()}
	opts.Cache.ByObject = map[client.Object]cache.ByObject{
		// Of an inventory's managedFields the loop reads which list elements each manager
		// owns, nothing else: the rest is dropped, and repeated strings are shared.
		&v1alpha1.ReleaseInventory{}: {Transform: inventory.CompactForCache},
		&v1alpha1.Release{}:          strip, &v1alpha1.Cluster{}: strip,
		&extv1alpha1.GlobalHealthRuleSet{}: strip, &extv1alpha1.HealthRuleSet{}: strip,
	}
	// Every informer's first list is a plain list, not a stream (clustercache.NewListThenWatchInformer).
	opts.Cache.NewInformer = clustercache.NewListThenWatchInformer
	if len(m.Namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range m.Namespaces {
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
	// The loop's writes and live reads (the Release whose owed sync record a pass confirms, kubeconfig Secrets)
	// go straight to the API server through a client whose every request is bounded, so
	// a hung connection fails one pass (retried) instead of holding its worker forever;
	// the manager's watches are not bounded by it.
	direct := rest.CopyConfig(cfg)
	direct.Timeout = m.RequestTimeout
	// One client-side rate limit (--kube-api-qps, --kube-api-burst) for the direct client and its
	// metadata writer (metaapply), as when they were one client.
	direct.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(direct.QPS, direct.Burst)
	directHTTP, err := rest.HTTPClientFor(direct)
	if err != nil {
		return nil, fmt.Errorf("creating the management client: %w", err)
	}
	live, err := client.New(direct, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: directHTTP})
	if err != nil {
		return nil, fmt.Errorf("creating the management client: %w", err)
	}
	clusters := clustercache.New(clustercache.Options{
		Local: cfg, SecretReader: live, Secrets: secrets,
		QPS: cmp.Or(t.QPS, m.QPS), Burst: cmp.Or(t.Burst, m.Burst), Timeout: t.Timeout,
		Kubeconfig: t.Kubeconfig, DefaultServiceAccount: t.DefaultServiceAccount, UnsafeReadAsObserver: t.UnsafeReadAsObserver,
		Watch: !t.DirectReads, NamespaceThreshold: t.NamespaceThreshold,
		Log: ctrl.Log.WithName("targets"),
	})
	// The manager stops the cache (its informers and Secret watches) at shutdown, after
	// the loop.
	if err := mgr.Add(clusters); err != nil {
		return nil, fmt.Errorf("adding the cluster cache to the manager: %w", err)
	}
	var waker healthloop.Waker
	switch wakeCfg := rest.CopyConfig(cfg); {
	case o.WakeUps.Disable:
	case o.WakeUps.SyncURL != "":
		wakeCfg.Timeout = syncTimeout
		waker = syncapiclient.NewClient(syncapiclient.DirectConfig(wakeCfg, o.WakeUps.SyncURL, o.WakeUps.SyncCAFile))
	default:
		wakeCfg.Timeout = syncTimeout
		waker = syncapiclient.NewClient(wakeCfg)
	}
	// The loop's applies are answered with the object's metadata only (metaapply).
	writer, err := metaapply.New(live, direct, directHTTP)
	if err != nil {
		return nil, fmt.Errorf("creating the management client's writer: %w", err)
	}
	if o.WrapWriter != nil {
		writer = o.WrapWriter(writer)
	}
	h := healthloop.NewHealthController(mgr.GetCache(), writer, clusters, gate, waker)
	h.LiveReader = live
	h.NamespaceWorkers = m.NamespaceWorkers
	h.PassTimeout = t.PassTimeout
	h.ReadConcurrency = t.ReadConcurrency
	h.Fair.PassBudget = o.Evaluation.PassBudget
	h.Fair.Slots = o.Evaluation.Slots
	if label := o.Evaluation.NamespaceWeightLabel; label != "" {
		if _, err := mgr.GetCache().GetInformer(ctx, fairshare.NamespaceMetadata()); err != nil {
			return nil, fmt.Errorf("watching Namespaces for --namespace-weight-label: %w", err)
		}
		h.Fair.Weight = fairshare.NamespaceWeights(ctx, mgr.GetCache(), label)
	}
	// Events (events.k8s.io/v1) through the manager's recorder: its broadcaster merges
	// repeats of one Event into a series.
	h.Events = mgr.GetEventRecorder(EventSource)
	if _, err := h.SetupWithManager(ctx, mgr, m.Workers); err != nil {
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
