package subresources

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
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

// Explainer says which rule decided each entry of a HealthResponse that is not
// Healthy (HealthEntry.DecidedBy): it re-evaluates, on demand, the rules that the
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

	// targets keeps the clients of kubeconfig Secrets (targetKey → dynamic.Interface),
	// created on first use.
	targetsOnce sync.Once
	targets     *lru.Cache
}

// Explain sets DecidedBy of every entry of resp that is neither Healthy nor unassessed
// and that a rule decides now: the rule set kind, namespace and name, the 0-based rule
// index, and the cause (health.Explain): RuleFailed, DeadlinePassed (the failure
// outlasted spec.healthAssessment.deadline since the entry's firstUnhealthy) or
// EvaluationError. rel and inv are what resp was built from (inv gives the resources;
// nil means no entries). An entry whose object is missing has no decider (its message
// says so already).
//
// The error says why some entries could not be explained: the Release has no
// spec.healthAssessment is no error, but rules that do not compile, an unreadable
// Cluster or kubeconfig Secret, objects that could not be read, entries whose rules
// did not finish within Timeout, or more entries than MaxEntries are; the entries
// explained before it stay set.
func (x *Explainer) Explain(ctx context.Context, rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory, resp *HealthResponse) error {
	var todo []int
	for i := range resp.Entries {
		if s := resp.Entries[i].State; s != v1alpha1.StateHealthy && s != "" {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 || rel.Spec.HealthAssessment == nil || inv == nil {
		return nil
	}
	timeout := x.Timeout
	if timeout <= 0 {
		timeout = DefaultExplainTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var errs []error
	if limit := x.maxEntries(); len(todo) > limit {
		errs = append(errs, fmt.Errorf("only the first %d of the %d entries that are not Healthy are explained", limit, len(todo)))
		todo = todo[:limit]
	}
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
	target, err := x.targetClient(ctx, rel)
	if err != nil {
		return err
	}
	resources := make(map[inventory.Key]*v1alpha1.InventoryEntry, len(inv.Entries))
	for i := range inv.Entries {
		resources[inventory.KeyOf(&inv.Entries[i])] = &inv.Entries[i]
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
			obj, err := target.Resource(gvr).Namespace(ie.Namespace).Get(ctx, ie.Name, metav1.GetOptions{})
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
			state, _ := health.DeriveState(r, anchor, deadline, now)
			e.DecidedBy = health.Explain(r, state)
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

// maxTargetClients is how many kubeconfig Secrets (by name, uid, resourceVersion and key) an
// Explainer keeps a client for.
const maxTargetClients = 64

// targetKey identifies one version of a kubeconfig in a Secret.
type targetKey struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
	key             string
}

// targetClient reads the objects of rel's target cluster: LocalConfig for a Cluster
// without kubeconfigSecretRef, else the kubeconfig in its Secret. The client of a
// kubeconfig is kept while its Secret does not change (at most maxTargetClients):
// client-go shares the transport of equal configurations only when it can (not with a
// proxy-url, a custom dialer or certificate callbacks), and a client per request left
// its idle connections open behind it.
func (x *Explainer) targetClient(ctx context.Context, rel *v1alpha1.Release) (dynamic.Interface, error) {
	cluster := &v1alpha1.Cluster{}
	if err := x.Reader.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}, cluster); err != nil {
		return nil, fmt.Errorf("reading Cluster %s/%s: %w", rel.Namespace, rel.Spec.ClusterRef.Name, err)
	}
	cfg := x.LocalConfig
	if ref := cluster.Spec.KubeconfigSecretRef; ref != nil {
		s := &corev1.Secret{}
		if err := x.Reader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, s); err != nil {
			return nil, fmt.Errorf("reading the kubeconfig Secret %s of Cluster %s: %w", ref.Name, cluster.Name, err)
		}
		x.targetsOnce.Do(func() { x.targets = lru.New(maxTargetClients) })
		key := targetKey{namespace: s.Namespace, name: s.Name, uid: s.UID, resourceVersion: s.ResourceVersion, key: ref.GetKey()}
		if c, ok := x.targets.Get(key); ok {
			return c.(dynamic.Interface), nil
		}
		data := s.Data[ref.GetKey()]
		if len(data) == 0 { // clientcmd would blame KUBERNETES_MASTER
			return nil, fmt.Errorf("the kubeconfig Secret %s of Cluster %s has no key %q", ref.Name, cluster.Name, ref.GetKey())
		}
		cfg, err := kubeconfig.RESTConfig(data, x.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("the kubeconfig of Cluster %s (Secret %s, key %s): %w", cluster.Name, ref.Name, ref.GetKey(), err)
		}
		c, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("the kubeconfig of Cluster %s (Secret %s, key %s): %w", cluster.Name, ref.Name, ref.GetKey(), err)
		}
		x.targets.Add(key, c)
		return c, nil
	} else if cfg == nil {
		return nil, fmt.Errorf("the Cluster %s has no kubeconfigSecretRef and this server reads no local cluster", cluster.Name)
	}
	return dynamic.NewForConfig(cfg)
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
