package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/inventory"
	"github.com/kumodo/convoy-observer/internal/scheme"
	"github.com/kumodo/convoy-observer/internal/subresources"
)

// CauseDeadline says that a failing rule turned the entry Degraded because the Release's
// deadline passed since it first failed; the rule failing alone is health.CauseRuleFailed.
const CauseDeadline health.Cause = "DeadlinePassed"

// explainedEntry is one entry of release status -o json: the HealthResult's entry and,
// for a non-Healthy entry that a rule decided, which rule and why.
type explainedEntry struct {
	subresources.HealthEntry
	// DecidedBy names the rule set kind, namespace, name and rule index, and the cause:
	// RuleFailed (Progressing), DeadlinePassed (Degraded) or EvaluationError (Unknown).
	// null for a Healthy entry, or an Unknown one that no rule decided (not found,
	// unreadable), or when --explain is off.
	DecidedBy *health.Decider `json:"decidedBy"`
}

// explainedHealth is the output of release status -o json.
type explainedHealth struct {
	Release       string                    `json:"release"`
	RenderCurrent bool                      `json:"renderCurrent"`
	Summary       v1alpha1.HealthSummary    `json:"summary"`
	Entries       []explainedEntry          `json:"entries"`
	Hooks         []subresources.HealthHook `json:"hooks"`
}

// printJSON prints h with the explanations of decided (nil: none) as one JSON document.
func printJSON(out io.Writer, h *subresources.HealthResponse, decided map[inventory.Key]*health.Decider) error {
	doc := explainedHealth{Release: h.Release, RenderCurrent: h.RenderCurrent, Summary: h.Summary,
		Entries: make([]explainedEntry, 0, len(h.Entries)), Hooks: h.Hooks}
	if doc.Hooks == nil {
		doc.Hooks = []subresources.HealthHook{}
	}
	for _, e := range h.Entries {
		k := inventory.Key{Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}
		doc.Entries = append(doc.Entries, explainedEntry{HealthEntry: e, DecidedBy: decided[k]})
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// explain re-evaluates, on demand, the rules of the Release namespace/name against the
// live objects of its entries that h shows not Healthy, as the loop evaluates them, and
// returns which rule decided each one. It reads the Release, its ReleaseInventory (for
// the resources), its Cluster and the rule sets from the management cluster of cfg, and
// the objects from the target (cfg itself for a Cluster without kubeconfigSecretRef,
// else the kubeconfig in its Secret). The inventory is not changed: the answer is as of
// now, which may differ from the state the loop last wrote.
func explain(ctx context.Context, cfg *rest.Config, namespace, name string, h *subresources.HealthResponse) (map[inventory.Key]*health.Decider, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	rel := &v1alpha1.Release{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rel); err != nil {
		return nil, fmt.Errorf("reading Release %s/%s: %w", namespace, name, err)
	}
	ha := rel.Spec.HealthAssessment
	if ha == nil {
		return nil, nil
	}
	inv := &v1alpha1.ReleaseInventory{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, inv); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading ReleaseInventory %s/%s: %w", namespace, name, err)
	}
	var globals extv1alpha1.GlobalHealthRuleSetList
	var locals extv1alpha1.HealthRuleSetList
	if ha.GlobalRuleSetSelector != nil {
		if err := c.List(ctx, &globals); err != nil {
			return nil, fmt.Errorf("listing GlobalHealthRuleSets: %w", err)
		}
	}
	if ha.LocalRuleSetSelector != nil {
		if err := c.List(ctx, &locals, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing HealthRuleSets: %w", err)
		}
	}
	g, l, err := health.SelectRuleSets(globals.Items, locals.Items, ha.GlobalRuleSetSelector, ha.LocalRuleSetSelector, namespace)
	if err != nil {
		return nil, err
	}
	ev, err := health.NewEvaluator(g, l)
	if err != nil {
		return nil, fmt.Errorf("the selected rules do not compile: %w", err)
	}
	target, err := targetClient(ctx, c, cfg, rel)
	if err != nil {
		return nil, err
	}
	resources := map[inventory.Key]v1alpha1.InventoryEntry{}
	for i := range inv.Entries {
		resources[inventory.KeyOf(&inv.Entries[i])] = inv.Entries[i]
	}
	out := map[inventory.Key]*health.Decider{}
	for _, e := range h.Entries {
		if e.State == v1alpha1.StateHealthy || e.State == "" {
			continue
		}
		k := inventory.Key{Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}
		ie, ok := resources[k]
		if !ok || ie.Resource == "" || ie.Version == "" {
			continue
		}
		gvr := schema.GroupVersionResource{Group: ie.Group, Version: ie.Version, Resource: ie.Resource}
		obj, err := target.Resource(gvr).Namespace(ie.Namespace).Get(ctx, ie.Name, metav1.GetOptions{})
		if err != nil {
			continue // not found or unreadable: no rule decides, the entry's message says why
		}
		r := ev.Evaluate(ie.APIVersion(), ie.Resource, obj.Object)
		if r.DecidedBy == nil {
			continue
		}
		d := *r.DecidedBy
		if e.State == v1alpha1.StateDegraded && d.Cause == health.CauseRuleFailed {
			d.Cause = CauseDeadline
		}
		out[k] = &d
	}
	return out, nil
}

// targetClient reads the objects of rel's target cluster.
func targetClient(ctx context.Context, c client.Client, cfg *rest.Config, rel *v1alpha1.Release) (dynamic.Interface, error) {
	cluster := &v1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}, cluster); err != nil {
		return nil, fmt.Errorf("reading Cluster %s/%s: %w", rel.Namespace, rel.Spec.ClusterRef.Name, err)
	}
	tcfg := cfg
	if ref := cluster.Spec.KubeconfigSecretRef; ref != nil {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, s); err != nil {
			return nil, fmt.Errorf("reading the kubeconfig Secret of Cluster %s: %w", cluster.Name, err)
		}
		var err error
		if tcfg, err = clientcmd.RESTConfigFromKubeConfig(s.Data[ref.GetKey()]); err != nil {
			return nil, fmt.Errorf("the kubeconfig of Cluster %s: %w", cluster.Name, err)
		}
	}
	return dynamic.NewForConfig(tcfg)
}

// managementConfig is the rest.Config of the kubeconfig the flags name (the cluster of
// the Release), for --explain.
func (f *releaseAPIFlags) managementConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--explain reads the Release's rules and objects with the kubeconfig: %w", err)
	}
	return cfg, nil
}

// printExplanations prints, after the table of release status --explain, which rule
// decided each entry that is not Healthy.
func printExplanations(out io.Writer, h *subresources.HealthResponse, decided map[inventory.Key]*health.Decider) {
	fmt.Fprintln(out)
	fmt.Fprintln(out, "DECIDED BY")
	n := 0
	for _, e := range h.Entries {
		d := decided[inventory.Key{Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}]
		if d == nil {
			continue
		}
		set := d.Kind + "/" + d.Name
		if d.Namespace != "" {
			set = d.Kind + "/" + d.Namespace + "/" + d.Name
		}
		fmt.Fprintf(out, "%s %s: rule %d of %s (%s)\n", e.Kind, namespacedName(e.Namespace, e.Name), d.Rule, set, d.Cause)
		n++
	}
	if n == 0 {
		fmt.Fprintln(out, "No entry that a rule decides is failing now.")
	}
}
