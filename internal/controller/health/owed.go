package health

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// syncOwed reports whether the inventory carries the debt of a sync request that an
// earlier pass, maybe of a process that has since died, did not pay.
func (pi passInventory) syncOwed() bool {
	return pi.inv != nil && pi.inv.Annotations[inventory.AnnotationSyncOwed] != ""
}

// writeSyncOwed sets (owed) or removes the annotation inventory.AnnotationSyncOwed of
// inv under its own field manager, with inv's uid and resourceVersion rv (none when rv
// is empty) as preconditions, and returns the resourceVersion after the write. The pass sets it
// before it writes the state of an edge and removes it after the sync request
// succeeded: an observer killed between the two finds the debt on its next pass and
// pays it (at least once), where an in-memory flag would be lost.
func (h *HealthController) writeSyncOwed(ctx context.Context, inv *v1alpha1.ReleaseInventory, rv string, owed bool) (string, error) {
	meta := inventoryMeta(inv, rv)
	if owed {
		meta["annotations"] = map[string]any{inventory.AnnotationSyncOwed: h.Clock.Now().UTC().Format(time.RFC3339)}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "ReleaseInventory",
		"metadata":   meta,
	}}
	if err := h.Writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(inventory.FieldManagerSyncOwed), client.ForceOwnership); err != nil {
		return rv, fmt.Errorf("recording that a sync request is owed (%v): %w", owed, err)
	}
	return u.GetResourceVersion(), nil
}

// paid reports whether this process has sent the sync request owed for key since it
// last saw the inventory without a record of it.
func (h *HealthController) paid(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paidSync[key]
}

func (h *HealthController) setPaid(key string, paid bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !paid {
		delete(h.paidSync, key)
		return
	}
	if h.paidSync == nil {
		h.paidSync = map[string]bool{}
	}
	h.paidSync[key] = true
}
