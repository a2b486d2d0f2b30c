package inventory

import (
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// RecordEntry returns the apply configuration with which the controller-manager records
// e: its four keys always, and version, resource, wave and renderRef when set (the
// observer's fields, state to assessedRenderRef, are left out). The demo and the tests
// write inventories as the controller-manager does, through it.
func RecordEntry(e *v1alpha1.InventoryEntry) *acv1alpha1.InventoryEntryApplyConfiguration {
	ac := acv1alpha1.InventoryEntry().WithGroup(e.Group).WithKind(e.Kind).WithNamespace(e.Namespace).WithName(e.Name)
	if e.Version != "" {
		ac.WithVersion(e.Version)
	}
	if e.Resource != "" {
		ac.WithResource(e.Resource)
	}
	if e.Wave != nil {
		ac.WithWave(*e.Wave)
	}
	if e.RenderRef != "" {
		ac.WithRenderRef(e.RenderRef)
	}
	return ac
}

// RecordHook returns the apply configuration with which the controller-manager records
// the hook h: its name always, and workloadKind, namespace, workloadName, createdAt and
// timeout when set (the observer's fields, state to finishedAt, are left out).
func RecordHook(h *v1alpha1.HookEntry) *acv1alpha1.HookEntryApplyConfiguration {
	ac := acv1alpha1.HookEntry().WithName(h.Name)
	if h.WorkloadKind != "" {
		ac.WithWorkloadKind(h.WorkloadKind)
	}
	if h.Namespace != "" {
		ac.WithNamespace(h.Namespace)
	}
	if h.WorkloadName != "" {
		ac.WithWorkloadName(h.WorkloadName)
	}
	if h.CreatedAt != nil {
		ac.WithCreatedAt(*h.CreatedAt)
	}
	if h.Timeout != "" {
		ac.WithTimeout(h.Timeout)
	}
	return ac
}
