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

	// The indexes of the selected sets are sorted, and each set is copied once: a set
	// is a large struct, and with the rule library selected a pass selects about 70.
	gi := make([]int, 0, len(global))
	for i := range global {
		if gs.Matches(labels.Set(global[i].Labels)) {
			gi = append(gi, i)
		}
	}
	slices.SortStableFunc(gi, func(a, b int) int { return cmp.Compare(global[a].Name, global[b].Name) })
	li := make([]int, 0, len(local))
	for i := range local {
		if local[i].Namespace == ns && ls.Matches(labels.Set(local[i].Labels)) {
			li = append(li, i)
		}
	}
	slices.SortStableFunc(li, func(a, b int) int { return cmp.Compare(local[a].Name, local[b].Name) })
	var selGlobal []extv1alpha1.GlobalHealthRuleSet
	if len(gi) > 0 {
		selGlobal = make([]extv1alpha1.GlobalHealthRuleSet, len(gi))
		for j, i := range gi {
			selGlobal[j] = global[i]
		}
	}
	var selLocal []extv1alpha1.HealthRuleSet
	if len(li) > 0 {
		selLocal = make([]extv1alpha1.HealthRuleSet, len(li))
		for j, i := range li {
			selLocal[j] = local[i]
		}
	}
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
