package healthloop

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// FieldKeeper is a ClusterCache that keeps of each target object only the fields that
// rules read (clustercache.Cache): the loop tells it what every rule set reads
// (docs/design.md, "What the cache keeps").
type FieldKeeper interface {
	// SetRuleFields sets what the rules read; informers whose objects lack a field
	// that they now read list their type again.
	SetRuleFields(rf *health.RuleFields)
	// RuleFields returns what was last set; ok is false before the first SetRuleFields.
	RuleFields() (rf *health.RuleFields, ok bool)
}

// ruleFields is the loop's side of a FieldKeeper: one computation at a time.
type ruleFields struct {
	mu sync.Mutex
}

// keepFields makes sure, before a pass reads its entries, that the cluster cache keeps
// every field that the pass's rules (evaluator) read of the recorded types: when it does
// not (the first pass, or a rule set changed to read more), it computes what the rules
// of every rule set read (health.FieldsOf over all GlobalHealthRuleSets and
// HealthRuleSets in the cache) and sets it, so the informers concerned list again
// before this pass reads from them. A cache that keeps every field needs nothing.
func (h *HealthController) keepFields(ctx context.Context, evaluator *health.Evaluator, entries []v1alpha1.InventoryEntry) error {
	keeper, ok := h.Clusters.(FieldKeeper)
	if !ok {
		return nil
	}
	if covered(keeper, evaluator, entries) {
		return nil
	}
	h.fields.mu.Lock()
	defer h.fields.mu.Unlock()
	if covered(keeper, evaluator, entries) {
		return nil // another pass did it meanwhile
	}
	var globals extv1alpha1.GlobalHealthRuleSetList
	if err := h.Reader.List(ctx, &globals, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing GlobalHealthRuleSets: %w", err)
	}
	var locals extv1alpha1.HealthRuleSetList
	if err := h.Reader.List(ctx, &locals, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing HealthRuleSets: %w", err)
	}
	// With this pass's own rules: a set it selected may be gone from the lists already.
	keeper.SetRuleFields(health.FieldsOf(globals.Items, locals.Items).Merge(evaluator.Fields()))
	return nil
}

// covered reports whether keeper keeps every field that evaluator's rules read of the
// types of entries.
func covered(keeper FieldKeeper, evaluator *health.Evaluator, entries []v1alpha1.InventoryEntry) bool {
	kept, ok := keeper.RuleFields()
	if !ok {
		return false
	}
	if kept == nil {
		return true
	}
	read := evaluator.Fields()
	for i := range entries {
		av, res := entries[i].APIVersion(), entries[i].Resource
		if !kept.For(av, res).Covers(read.For(av, res)) {
			return false
		}
	}
	return true
}
