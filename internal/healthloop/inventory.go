package healthloop

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// passInventory is rel's ReleaseInventory as one pass sees it: read once from the cache,
// with its field owners parsed once.
type passInventory struct {
	// inv is nil when there is no inventory.
	inv *v1alpha1.ReleaseInventory
	// own is nil when the managedFields could not be parsed; err says why.
	own *inventory.Ownership
	err error
}

// resourceVersion is the resourceVersion the pass read, the precondition of its first
// write.
func (pi passInventory) resourceVersion() string {
	if pi.inv == nil {
		return ""
	}
	return pi.inv.ResourceVersion
}

// readInventory reads rel's ReleaseInventory from the cache and parses its managedFields.
// A failed read is returned (the queue retries); unparsable managedFields are the
// inventory's error, which the assessment reports.
func (h *HealthController) readInventory(ctx context.Context, rel *v1alpha1.Release) (passInventory, error) {
	inv := &v1alpha1.ReleaseInventory{}
	if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(rel), inv); err != nil {
		if apierrors.IsNotFound(err) {
			return passInventory{}, nil
		}
		return passInventory{}, fmt.Errorf("reading ReleaseInventory %s: %w", keyOf(rel), err)
	}
	own, err := inventory.ReadOwnership(inv)
	if err != nil {
		return passInventory{inv: inv, err: fmt.Errorf("reading the ReleaseInventory's field owners: %w", err)}, nil
	}
	return passInventory{inv: inv, own: own}, nil
}
