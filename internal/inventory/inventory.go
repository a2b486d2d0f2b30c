// Package inventory holds what the loop, the /health endpoint and the CLI share about a
// ReleaseInventory: entry keys, the health summary, renderCurrent, and which entries and
// hooks the controller-manager still records.
//
// An entry belongs to the inventory only while the controller-manager records it
// (docs/design.md, "Objects and owners"). Server-Side Apply keeps a list-map element alive while any field
// manager owns it, so the observer must never send an entry that only it still owns:
// Ownership.RecordedEntries and RecordedHooks read the managedFields to tell the controller-manager's entries from the
// observer's leftovers.
package inventory

import (
	"fmt"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// Field managers of the observer (docs/design.md, "The write protocol" and "Hook polling").
const (
	// FieldManagerInventory writes state, message, firstUnhealthy and assessedRenderRef
	// of the inventory entries.
	FieldManagerInventory = "convoy-health-inventory"
	// FieldManagerHealth writes the Healthy condition and healthSummary of a Release.
	FieldManagerHealth = "convoy-health"
	// FieldManagerHookStatus writes state, message and finishedAt of the hooks.
	FieldManagerHookStatus = "convoy-hook-status"
	// FieldManagerSyncOwed removes an AnnotationSyncOwed annotation without a baseline
	// (an older observer's) once the sync request it records was sent; the applies that
	// set the annotation carry it under their own field managers.
	FieldManagerSyncOwed = "convoy-sync-owed"
)

// AnnotationSyncOwed, on a ReleaseInventory, records that the observer owes its Release
// a sync request: set by the write of the state that causes the request, so the debt
// survives a crash of the observer before the request. Its value is "<time, RFC 3339
// with nanoseconds> syncRequestedAt=<the Release's SyncRequestedAtAnnotation before the
// write, or "sha256:<hex>" of one longer than 64 bytes>": the debt is paid once the
// Release's annotation differs.
const AnnotationSyncOwed = "convoy.kumodo.io/sync-owed"

// Key identifies an inventory entry: its four list-map keys.
type Key struct {
	Group, Kind, Namespace, Name string
}

// KeyOf returns the key of e.
func KeyOf(e *v1alpha1.InventoryEntry) Key {
	return Key{Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}
}

// String formats k as Kind namespace/name (or Kind name for cluster-scoped objects),
// with the group when it is not core: "Deployment.apps demo/web".
func (k Key) String() string {
	kind := k.Kind
	if k.Group != "" {
		kind += "." + k.Group
	}
	if k.Namespace == "" {
		return fmt.Sprintf("%s %s", kind, k.Name)
	}
	return fmt.Sprintf("%s %s/%s", kind, k.Namespace, k.Name)
}

// Summarize counts entries by state. An entry without a state yet counts as Unknown.
func Summarize(entries []v1alpha1.InventoryEntry) v1alpha1.HealthSummary {
	s := v1alpha1.HealthSummary{Total: int32(len(entries))}
	for i := range entries {
		switch entries[i].State {
		case v1alpha1.StateHealthy:
			s.Healthy++
		case v1alpha1.StateProgressing:
			s.Progressing++
		case v1alpha1.StateDegraded:
			s.Degraded++
		default:
			s.Unknown++
		}
	}
	return s
}

// RenderCurrent reports whether every entry has renderRef == lastAttempted
// (docs/design.md, "The write protocol"). It is true for no entries.
func RenderCurrent(lastAttempted string, entries []v1alpha1.InventoryEntry) bool {
	for i := range entries {
		if entries[i].RenderRef != lastAttempted {
			return false
		}
	}
	return true
}
