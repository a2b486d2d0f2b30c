package health

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
)

// SelectRuleSets picks the rule sets that a Release uses (docs/design.md,
// "Selection" and "Assessment" step 1): the GlobalHealthRuleSets whose
// labels match globalSel and the HealthRuleSets of namespace ns whose labels match
// localSel. A nil selector selects no set, an empty one ({}) every set; a HealthRuleSet
// of another namespace is never selected.
//
// Both results are new slices sorted by name (docs/design.md, "Rule order"), holding shallow
// copies of the selected sets: their rules are shared with the input, so treat them as
// read-only. An invalid selector (for example a bad operator or label value) returns an
// error that names the selector.
func SelectRuleSets(global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet,
	globalSel, localSel *metav1.LabelSelector, ns string) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet, error) {
	gs, err := asSelector(globalSel)
	if err != nil {
		return nil, nil, fmt.Errorf("globalRuleSetSelector: %w", err)
	}
	ls, err := asSelector(localSel)
	if err != nil {
		return nil, nil, fmt.Errorf("localRuleSetSelector: %w", err)
	}

	var selGlobal []extv1alpha1.GlobalHealthRuleSet
	for i := range global {
		if gs.Matches(labels.Set(global[i].Labels)) {
			selGlobal = append(selGlobal, global[i])
		}
	}
	var selLocal []extv1alpha1.HealthRuleSet
	for i := range local {
		if local[i].Namespace == ns && ls.Matches(labels.Set(local[i].Labels)) {
			selLocal = append(selLocal, local[i])
		}
	}
	slices.SortStableFunc(selGlobal, func(a, b extv1alpha1.GlobalHealthRuleSet) int {
		return cmp.Compare(a.Name, b.Name)
	})
	slices.SortStableFunc(selLocal, func(a, b extv1alpha1.HealthRuleSet) int {
		return cmp.Compare(a.Name, b.Name)
	})
	return selGlobal, selLocal, nil
}

// asSelector converts a label selector; nil selects nothing, {} everything.
func asSelector(sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil {
		return labels.Nothing(), nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	return s, nil
}
