// health coverage --kubeconfig: the kinds of a cluster's Releases (and, with --served, of
// its served resources) that no rule the Releases select judges.

package main

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/inventory"
	"github.com/kumodo/convoy-observer/internal/scheme"
)

// managementClient returns the config of the connection flags and a client of this
// project's types; errors exit 1 (exitClusterError).
func managementClient(conn *connection) (*rest.Config, client.Client, error) {
	cfg, err := conn.restConfig()
	if err != nil {
		return nil, nil, &exitError{code: exitClusterError, err: err}
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, nil, &exitError{code: exitClusterError, err: fmt.Errorf("client for %s: %w", cfg.Host, err)}
	}
	return cfg, cl, nil
}

// runCluster reports on the Releases of a cluster and, with --served, its served
// resources.
func (o *coverageOptions) runCluster(ctx context.Context, env *cliEnv, extraGlobal []extv1alpha1.GlobalHealthRuleSet, extraLocal []extv1alpha1.HealthRuleSet) error {
	cfg, cl, err := managementClient(env.conn)
	if err != nil {
		return err
	}
	var releases v1alpha1.ReleaseList
	var opts []client.ListOption
	if ns := env.conn.namespace(); ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := cl.List(ctx, &releases, opts...); err != nil {
		return &exitError{code: exitClusterError, err: fmt.Errorf("listing Releases: %w", err)}
	}
	c := newCoverage()
	sets := &ruleSetLists{reader: cl, local: map[string][]extv1alpha1.HealthRuleSet{}}
	cache := health.NewEvaluatorCache(0)
	var selections []*health.Evaluator
	var errs []error
	unassessed := 0
	for i := range releases.Items {
		rel := &releases.Items[i]
		name := toolscache.MetaObjectToName(rel).String()
		if rel.Spec.HealthAssessment == nil {
			unassessed++
			continue
		}
		global, local, err := sets.selectFor(ctx, rel)
		if err != nil {
			return &exitError{code: exitClusterError, err: fmt.Errorf("Release %s: %w", name, err)}
		}
		ev, err := cache.Get(append(global, extraGlobal...), append(local, extraLocal...))
		if err != nil {
			errs = append(errs, fmt.Errorf("Release %s is not counted: its rules do not compile: %w", name, err))
			continue
		}
		selections = append(selections, ev)
		inv := &v1alpha1.ReleaseInventory{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rel), inv); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue // nothing applied yet
			}
			return &exitError{code: exitClusterError, err: fmt.Errorf("reading the ReleaseInventory %s: %w", name, err)}
		}
		entries, _, err := inventory.RecordedEntries(inv, "")
		if err != nil {
			return &exitError{code: exitClusterError, err: fmt.Errorf("reading the entries of the ReleaseInventory %s: %w", name, err)}
		}
		for j := range entries {
			e := &entries[j]
			c.add(kindKey{apiVersion: e.APIVersion(), kind: e.Kind, resource: e.Resource}, name, ev.RulesApplied(e.APIVersion(), e.Resource))
		}
	}
	if o.served {
		if len(selections) == 0 && len(extraGlobal)+len(extraLocal) > 0 {
			ev, err := compileForCoverage(extraGlobal, extraLocal)
			if err != nil {
				return err
			}
			selections = append(selections, ev)
		}
		served, err := servedResources(cfg)
		if err != nil {
			return &exitError{code: exitClusterError, err: err}
		}
		for _, s := range served {
			n := 0
			for _, ev := range selections {
				n += ev.RulesApplied(s.apiVersion, s.resource)
			}
			c.addServed(s, n)
		}
	}
	note := ""
	if unassessed > 0 {
		note = fmt.Sprintf("%d of %d Releases has no spec.healthAssessment: nothing judges its objects, on purpose, and they are not counted.", unassessed, len(releases.Items))
		if unassessed > 1 {
			note = fmt.Sprintf("%d of %d Releases have no spec.healthAssessment: nothing judges their objects, on purpose, and they are not counted.", unassessed, len(releases.Items))
		}
	}
	return finishCoverage(env, c, "Releases", note, errs)
}

// ruleSetLists selects the rule sets of each Release as the health loop does
// (health.SelectRuleSets), listing the GlobalHealthRuleSets once and the HealthRuleSets
// once per namespace, however many Releases there are.
type ruleSetLists struct {
	reader       client.Reader
	global       []extv1alpha1.GlobalHealthRuleSet
	globalListed bool
	local        map[string][]extv1alpha1.HealthRuleSet
}

// selectFor returns the sets that rel selects; rel has a spec.healthAssessment.
func (l *ruleSetLists) selectFor(ctx context.Context, rel *v1alpha1.Release) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet, error) {
	ha := rel.Spec.HealthAssessment
	if ha.GlobalRuleSetSelector != nil && !l.globalListed {
		var list extv1alpha1.GlobalHealthRuleSetList
		if err := l.reader.List(ctx, &list); err != nil {
			return nil, nil, fmt.Errorf("listing GlobalHealthRuleSets: %w", err)
		}
		l.global, l.globalListed = list.Items, true
	}
	locals, listed := l.local[rel.Namespace]
	if ha.LocalRuleSetSelector != nil && !listed {
		var list extv1alpha1.HealthRuleSetList
		if err := l.reader.List(ctx, &list, client.InNamespace(rel.Namespace)); err != nil {
			return nil, nil, fmt.Errorf("listing HealthRuleSets of namespace %s: %w", rel.Namespace, err)
		}
		locals = list.Items
		l.local[rel.Namespace] = locals
	}
	g, lo, err := health.SelectRuleSets(l.global, locals, ha.GlobalRuleSetSelector, ha.LocalRuleSetSelector, rel.Namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("selecting health rule sets: %w", err)
	}
	return g, lo, nil
}

// servedResources lists the resources the cluster serves that can be read (verb get),
// subresources left out, each with its apiVersion and kind.
func servedResources(cfg *rest.Config) ([]kindKey, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovering the served resources: %w", err)
	}
	var out []kindKey
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerb(r.Verbs, "get") {
				continue
			}
			out = append(out, kindKey{apiVersion: gv.String(), kind: r.Kind, resource: r.Name})
		}
	}
	return out, nil
}

func hasVerb(verbs []string, verb string) bool {
	for _, v := range verbs {
		if v == verb {
			return true
		}
	}
	return false
}
