// Package rulesets lists the health rule sets that a Release selects, for the health
// loop (collectRules) and for convoy-api's explanations, which must select exactly
// the same sets to name the rule that decided an entry.
//
//	global, local, err := rulesets.Collect(ctx, reader, rel)
//	ev, err := health.NewEvaluator(global, local)
package rulesets

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// Collect lists the GlobalHealthRuleSets and the HealthRuleSets of rel's namespace
// through r and keeps those that rel's selectors select (docs/design.md,
// "Selection"; docs/design.md, "Assessment" step 1), sorted by name as
// health.SelectRuleSets returns them. A nil selector lists nothing. rel must have a
// spec.healthAssessment (nil selects nothing). The error names what could not be
// listed, or the invalid selector.
//
// When r is a cache, the sets are not deep-copied out of it (every pass of every
// Release lists them, and with the rule library selected that is about 70 sets and
// hundreds of rules): the returned sets share their content with the cache and must
// not be modified. health.EvaluatorCache and health.NewEvaluator only read them.
func Collect(ctx context.Context, r client.Reader, rel *v1alpha1.Release) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet, error) {
	ha := rel.Spec.HealthAssessment
	if ha == nil {
		return nil, nil, nil
	}
	var globals extv1alpha1.GlobalHealthRuleSetList
	if ha.GlobalRuleSetSelector != nil {
		if err := r.List(ctx, &globals, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("listing GlobalHealthRuleSets: %w", err)
		}
	}
	var locals extv1alpha1.HealthRuleSetList
	if ha.LocalRuleSetSelector != nil {
		if err := r.List(ctx, &locals, client.InNamespace(rel.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("listing HealthRuleSets of namespace %s: %w", rel.Namespace, err)
		}
	}
	g, l, err := health.SelectRuleSets(globals.Items, locals.Items, ha.GlobalRuleSetSelector, ha.LocalRuleSetSelector, rel.Namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("selecting health rule sets: %w", err)
	}
	return g, l, nil
}
