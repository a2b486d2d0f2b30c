package inventory

import (
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// The observer records which rule decided an entry (InventoryEntry.decidedBy) as the
// health.Decider of its assessment, and convoy-api's /health reads it back: these two
// functions are the only translations between the two shapes, so both ends agree.

// RecordDecider returns the apply configuration of an entry's decidedBy for d, with all
// five fields set (namespace "" for a GlobalHealthRuleSet); nil for a nil d.
func RecordDecider(d *health.Decider) *acv1alpha1.EntryDeciderApplyConfiguration {
	if d == nil {
		return nil
	}
	return acv1alpha1.EntryDecider().WithKind(d.Kind).WithNamespace(d.Namespace).WithName(d.Name).
		WithRule(int32(d.Rule)).WithCause(string(d.Cause))
}

// DeciderOf returns the health.Decider of a recorded decidedBy; nil for a nil d.
func DeciderOf(d *v1alpha1.EntryDecider) *health.Decider {
	if d == nil {
		return nil
	}
	return &health.Decider{Kind: d.Kind, Namespace: d.Namespace, Name: d.Name, Rule: int(d.Rule), Cause: health.Cause(d.Cause)}
}
