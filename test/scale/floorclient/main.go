// Command floorclient is the floor of the scale benchmark (hack/scale --floor): the
// least a health loop must do for the benchmark's Releases, with the observer's
// concurrency, clients and cache, and nothing else. It watches Releases, their
// ReleaseInventories and the Deployments (and, as the observer does, Clusters and rule
// sets); for each Release it judges every recorded
// Deployment with hand-written Go (the convoy-defaults rule: observed generation,
// updated and available replicas), then makes the spec's writes only: one Server-Side
// Apply of the entries' states and messages (the rule's message, in Go), one POST of the
// sync request when every entry is Healthy, one Server-Side Apply of the Healthy
// condition and healthSummary. No rules, no fairness, no
// owed-request record, no Events, no metrics: the observer's converge over this one's is
// what the observer's own work costs.
//
// It takes the observer's connection flags (--kubeconfig, --sync-url, --workers,
// --kube-api-qps, --kube-api-burst) and --pprof-bind-address (hack/scale
// --cpu-profile), and accepts and ignores the others the benchmark passes.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // hack/scale --cpu-profile
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/inventory"
	"github.com/kumodo/convoy-observer/internal/scheme"
)

func main() {
	var (
		kubeconfig = flag.String("kubeconfig", "", "the management cluster's kubeconfig")
		syncURL    = flag.String("sync-url", "", "where the sync requests go")
		workers    = flag.Int("workers", 64, "Releases assessed at once (the observer's default)")
		qps        = flag.Float64("kube-api-qps", 300, "the management client's QPS (the observer's default)")
		burst      = flag.Int("kube-api-burst", 600, "the management client's burst (the observer's default)")
	)
	pprofAddr := flag.String("pprof-bind-address", "", "where net/http/pprof listens (hack/scale --cpu-profile); empty: nowhere")
	for _, ignored := range []string{"metrics-bind-address", "health-probe-bind-address", "v"} {
		flag.String(ignored, "", "ignored")
	}
	flag.Parse()
	if *pprofAddr != "" && *pprofAddr != "0" {
		go func() { _ = http.ListenAndServe(*pprofAddr, nil) }() // net/http/pprof's handlers
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *syncURL, *workers, float32(*qps), *burst); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "floorclient:", err)
		os.Exit(1)
	}
}

var started = time.Now()

func run(ctx context.Context, kubeconfig, syncURL string, workers int, qps float32, burst int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = qps, burst
	sch := scheme.New()
	// The observer's cache: every informer's first list is a plain list.
	ca, err := cache.New(cfg, cache.Options{Scheme: sch, NewInformer: clustercache.NewListThenWatchInformer})
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return err
	}
	queue := workqueue.NewTyped[types.NamespacedName]()
	go func() { <-ctx.Done(); queue.ShutDown() }()
	enqueue := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { queue.Add(client.ObjectKeyFromObject(obj.(client.Object))) },
		UpdateFunc: func(_, obj any) { queue.Add(client.ObjectKeyFromObject(obj.(client.Object))) },
	}
	// The kinds the observer watches too (rule sets and Clusters: a health loop must read
	// them, though this one needs them not), so both start the same informers.
	for _, o := range []client.Object{&v1alpha1.Release{}, &v1alpha1.ReleaseInventory{}, &appsv1.Deployment{},
		&v1alpha1.Cluster{}, &extv1alpha1.GlobalHealthRuleSet{}, &extv1alpha1.HealthRuleSet{}} {
		inf, err := ca.GetInformer(ctx, o)
		if err != nil {
			return err
		}
		if _, isRelease := o.(*v1alpha1.Release); isRelease {
			if _, err := inf.AddEventHandler(enqueue); err != nil {
				return err
			}
		}
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache did not sync")
	}
	fmt.Fprintf(os.Stderr, "floorclient: caches synced %s after the start\n", time.Since(started).Round(time.Millisecond))
	f := &floor{cache: ca, client: c, syncURL: syncURL, http: &http.Client{Timeout: 10 * time.Second}}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := f.pass(ctx, key); err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "floorclient: %s: %v\n", key, err)
					go func() { time.Sleep(time.Second); queue.Add(key) }()
				}
				queue.Done(key)
			}
		})
	}
	wg.Wait()
	return nil
}

type floor struct {
	cache   cache.Cache
	client  client.Client
	syncURL string
	http    *http.Client
}

// pass judges the Release key's Deployments and makes the spec's writes.
func (f *floor) pass(ctx context.Context, key types.NamespacedName) error {
	rel := &v1alpha1.Release{}
	if err := f.cache.Get(ctx, key, rel); err != nil {
		return client.IgnoreNotFound(err)
	}
	if c := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy); c != nil && c.Status == metav1.ConditionTrue {
		return nil // converged: the benchmark's Deployments do not change before then
	}
	inv := &v1alpha1.ReleaseInventory{}
	if err := f.cache.Get(ctx, key, inv); err != nil {
		return err
	}
	healthy := 0
	list := make([]*acv1alpha1.InventoryEntryApplyConfiguration, 0, len(inv.Entries))
	for _, e := range inv.Entries {
		state, message := v1alpha1.StateProgressing, "not found"
		d := &appsv1.Deployment{}
		if err := f.cache.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, d); err == nil {
			message = deploymentMessage(d)
			if deploymentHealthy(d) {
				state = v1alpha1.StateHealthy
				healthy++
			}
		}
		list = append(list, acv1alpha1.InventoryEntry().WithGroup(e.Group).WithKind(e.Kind).
			WithNamespace(e.Namespace).WithName(e.Name).WithState(state).WithMessage(message).WithAssessedRenderRef(e.RenderRef))
	}
	ac := acv1alpha1.ReleaseInventory(inv.Name, inv.Namespace).WithUID(inv.UID).WithEntries(list...)
	if err := f.client.Apply(ctx, ac, client.FieldOwner(inventory.FieldManagerInventory), client.ForceOwnership); err != nil {
		return err
	}
	status, reason := metav1.ConditionFalse, v1alpha1.ReasonProgressing
	if healthy == len(inv.Entries) {
		if err := f.sync(ctx, rel); err != nil {
			return err
		}
		status, reason = metav1.ConditionTrue, v1alpha1.ReasonHealthy
	}
	cond := metav1ac.Condition().WithType(v1alpha1.ConditionHealthy).WithStatus(status).WithReason(reason).
		WithMessage(fmt.Sprintf("%d/%d healthy", healthy, len(inv.Entries))).
		WithObservedGeneration(rel.Generation).WithLastTransitionTime(metav1.NewTime(time.Now().UTC().Truncate(time.Second)))
	summary := acv1alpha1.HealthSummary().WithTotal(int32(len(inv.Entries))).WithHealthy(int32(healthy)).
		WithProgressing(int32(len(inv.Entries) - healthy)).WithDegraded(0).WithUnknown(0)
	st := acv1alpha1.Release(rel.Name, rel.Namespace).WithStatus(acv1alpha1.ReleaseStatus().WithConditions(cond).WithHealthSummary(summary))
	return f.client.Status().Apply(ctx, st, client.FieldOwner(inventory.FieldManagerHealth), client.ForceOwnership)
}

// deploymentHealthy is convoy-defaults' Deployment rule in Go.
func deploymentHealthy(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want
}

// deploymentMessage is convoy-defaults' Deployment message in Go.
func deploymentMessage(d *appsv1.Deployment) string {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return fmt.Sprintf("%d/%d available, %d updated", d.Status.AvailableReplicas, want, d.Status.UpdatedReplicas)
}

// sync POSTs the Release's sync request.
func (f *floor) sync(ctx context.Context, rel *v1alpha1.Release) error {
	body := fmt.Sprintf(`{"namespace":%q,"name":%q}`, rel.Namespace, rel.Name)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.syncURL, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("sync request: %s", resp.Status)
	}
	return nil
}
