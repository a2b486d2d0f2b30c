package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kumodo/convoy-observer/internal/syncapi"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/inventory"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
	"github.com/kumodo/convoy-observer/internal/rulesets"
)

// Bounds of one explanation (Explainer).
const (
	// DefaultExplainMaxEntries is how many entries that are not Healthy one /health
	// request re-evaluates at most: one read of the target cluster each.
	DefaultExplainMaxEntries = 100
	// DefaultExplainTimeout bounds the reads and rule evaluations of one explanation.
	DefaultExplainTimeout = 10 * time.Second
	// explainConcurrency is how many objects one explanation reads at a time.
	explainConcurrency = 4
)

// Explainer says which rule decided each entry of a syncapi.HealthResult that is not
// Healthy (syncapi.HealthEntry.DecidedBy): it re-evaluates, on demand, the rules that the
// Release selects (rulesets.Collect, compiled as the loop compiles them) against the
// live objects of those entries, as the health loop evaluates them, and writes nothing.
// The answer is as of now: an object that recovered since the loop's last pass has no
// decider, and one that started failing is RuleFailed until the deadline passes.
//
// It is safe for concurrent use once its fields are set.
type Explainer struct {
	// Reader reads, on the management cluster, the rule sets, the Release's Cluster and
	// the Cluster's kubeconfig Secret.
	Reader client.Reader
	// LocalConfig reaches the target of a Cluster without spec.kubeconfigSecretRef
	// (the management cluster itself). nil: such entries are not explained, and the
	// answer's decidedByError says so.
	LocalConfig *rest.Config
	// Evaluators keeps compiled selections between requests; nil compiles every time.
	Evaluators *health.EvaluatorCache
	// Now is the clock of the deadline; nil is time.Now.
	Now func() time.Time
	// MaxEntries bounds the entries re-evaluated per call; < 1 is
	// DefaultExplainMaxEntries.
	MaxEntries int
	// Timeout bounds the reads and rule evaluations of one call (an evaluation stops
	// between two expressions, health.Evaluator.EvaluateContext); <= 0 is
	// DefaultExplainTimeout.
	Timeout time.Duration
	// Kubeconfig says which credentials a kubeconfig Secret may use, as in the loop
	// (exec plugins and local files are refused by default).
	Kubeconfig kubeconfig.Options

	// clusters reads target clusters (targets), created on first use.
	clustersOnce sync.Once
	clusters     *clustercache.Cache
}

// Explain sets RulesApplied of every entry of resp (the number of selected rules that
// match its apiVersion and resource; 0 for all when the Release has no
// spec.healthAssessment) and DecidedBy of every entry that is neither Healthy nor
// unassessed and that a rule decides now: the rule set kind, namespace and name, the
// 0-based rule index, and the cause (health.Explain): RuleFailed, DeadlinePassed (the
// failure outlasted spec.healthAssessment.deadline since the entry's firstUnhealthy) or
// EvaluationError. rel and inv are what resp was built from (inv gives the resources;
// nil means no entries). An entry whose object is missing has no decider (its message
// says so already). Counting the rules lists the selected rule sets once per call (a
// compiled selection is kept in Evaluators); only the entries that are not Healthy read
// the target.
//
// The error says why some entries could not be explained: the Release has no
// spec.healthAssessment is no error, but rules that cannot be listed or do not compile
// (then no entry has RulesApplied either), an unreadable Cluster or kubeconfig Secret,
// objects that could not be read, entries whose rules did not finish within Timeout, or
// more entries than MaxEntries are; the entries explained before it stay set.
func (x *Explainer) Explain(ctx context.Context, rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory, resp *syncapi.HealthResult) error {
	if len(resp.Entries) == 0 || inv == nil {
		return nil
	}
	if rel.Spec.HealthAssessment == nil {
		for i := range resp.Entries {
			resp.Entries[i].RulesApplied = ptr.To(0)
		}
		return nil
	}
	var todo []int
	for i := range resp.Entries {
		if s := resp.Entries[i].State; s != v1alpha1.StateHealthy && s != "" {
			todo = append(todo, i)
		}
	}
	timeout := x.Timeout
	if timeout <= 0 {
		timeout = DefaultExplainTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	global, local, err := rulesets.Collect(ctx, x.Reader, rel)
	if err != nil {
		return err
	}
	var ev *health.Evaluator
	if x.Evaluators != nil {
		ev, err = x.Evaluators.Get(global, local)
	} else {
		ev, err = health.NewEvaluator(global, local)
	}
	if err != nil {
		return fmt.Errorf("the selected rules do not compile: %w", err)
	}
	resources := make(map[inventory.Key]*v1alpha1.InventoryEntry, len(inv.Entries))
	for i := range inv.Entries {
		resources[inventory.KeyOf(&inv.Entries[i])] = &inv.Entries[i]
	}
	for i := range resp.Entries {
		e := &resp.Entries[i]
		if ie := resources[inventory.Key{Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}]; ie != nil {
			e.RulesApplied = ptr.To(ev.RulesApplied(ie.APIVersion(), ie.Resource))
		}
	}
	if len(todo) == 0 {
		return nil
	}
	var errs []error
	if limit := x.maxEntries(); len(todo) > limit {
		errs = append(errs, fmt.Errorf("only the first %d of the %d entries that are not Healthy are explained", limit, len(todo)))
		todo = todo[:limit]
	}
	target, err := x.targetReader(ctx, rel)
	if err != nil {
		return err
	}
	var deadline *time.Duration
	if d, ok := rel.GetDeadline(); ok {
		deadline = &d
	}
	now := time.Now()
	if x.Now != nil {
		now = x.Now()
	}
	readErrs := make([]error, len(todo))
	cut := make([]bool, len(todo))
	g := errgroup.Group{}
	g.SetLimit(explainConcurrency)
	for j, i := range todo {
		e := &resp.Entries[i]
		ie := resources[inventory.Key{Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}]
		if ie == nil {
			continue
		}
		gvr := schema.GroupVersionResource{Group: ie.Group, Version: ie.Version, Resource: ie.Resource}
		if inventory.CheckReference(gvr, ie.Namespace, ie.Name) != nil {
			continue // the loop does not read it either: its message says why
		}
		g.Go(func() error {
			obj, err := target.Get(ctx, gvr, ie.Namespace, ie.Name)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				readErrs[j] = fmt.Errorf("reading %s %s: %w", e.Kind, namespacedName(e.Namespace, e.Name), err)
				return nil
			}
			r, err := ev.EvaluateContext(ctx, ie.APIVersion(), ie.Resource, obj.Object)
			if err != nil {
				cut[j] = true // the rules may be slow on purpose: the timeout bounds them too
				return nil
			}
			var anchor *time.Time
			if e.FirstUnhealthy != nil {
				anchor = &e.FirstUnhealthy.Time
			}
			e.DecidedBy = health.Judge(r, anchor, deadline, now).DecidedBy
			return nil
		})
	}
	_ = g.Wait()
	if n, first := countErrors(readErrs); n > 0 {
		errs = append(errs, fmt.Errorf("%d objects could not be read, the first: %w", n, first))
	}
	if n := countTrue(cut); n > 0 {
		errs = append(errs, fmt.Errorf("%d entries were not evaluated within %s, the bound of one explanation: their rules take too long", n, timeout))
	}
	return errors.Join(errs...)
}

func (x *Explainer) maxEntries() int {
	if x.MaxEntries < 1 {
		return DefaultExplainMaxEntries
	}
	return x.MaxEntries
}

// targets returns the readers of target clusters: the loop's clustercache.Cache without
// watches (a GET per read, each bounded by its timeout, a dead cluster held down, the
// client of a kubeconfig Secret kept while the Secret does not change, and the same
// kubeconfig policy as the loop), made on first use.
func (x *Explainer) targets() *clustercache.Cache {
	x.clustersOnce.Do(func() {
		x.clusters = clustercache.New(clustercache.Options{Local: x.LocalConfig, SecretReader: x.Reader, Kubeconfig: x.Kubeconfig})
	})
	return x.clusters
}

// targetReader reads the objects of rel's target cluster: LocalConfig for a Cluster
// without kubeconfigSecretRef, else the kubeconfig in its Secret.
func (x *Explainer) targetReader(ctx context.Context, rel *v1alpha1.Release) (clustercache.ObjectReader, error) {
	cluster := &v1alpha1.Cluster{}
	if err := x.Reader.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}, cluster); err != nil {
		return nil, fmt.Errorf("reading Cluster %s/%s: %w", rel.Namespace, rel.Spec.ClusterRef.Name, err)
	}
	if cluster.Spec.KubeconfigSecretRef == nil && x.LocalConfig == nil {
		return nil, fmt.Errorf("the Cluster %s has no kubeconfigSecretRef and this server reads no local cluster", cluster.Name)
	}
	return x.targets().GetReader(ctx, cluster)
}

// countErrors returns how many of errs are not nil, and the first that is not.
func countErrors(errs []error) (int, error) {
	n, first := 0, error(nil)
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	return n, first
}

// countTrue returns how many of bs are true.
func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// namespacedName is namespace/name, or name for a cluster-scoped object.
func namespacedName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
