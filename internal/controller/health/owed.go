package health

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// The record of an owed sync request (inventory.AnnotationSyncOwed) costs no write of
// its own: its value, a unique time, rides in the apply that persists the edge's state
// (the hooks or the entries apply, under that apply's field manager), so the state and
// the debt land together. Every later apply of the observer carries the record while the
// debt is unpaid, so no apply drops it (Server-Side Apply would remove a field that its
// only owner no longer sends). Once the sync request succeeded, one JSON patch under the
// field manager convoy-sync-owed removes it, whoever owns it, and only if it still holds
// the value that was paid: a newer debt is never removed by the payment of an older one.
// An observer killed between the state write and the request finds the record on its
// next pass and pays it (at least once); one killed between the request and the removal
// pays it again (a duplicate, never a loss).

// owedState is what this process knows about the record of one Release.
type owedState struct {
	// value is the record this state is about (the annotation's value).
	value string
	// paid: this process sent the sync request owed for value.
	paid bool
	// removed: this process removed the record value after paying it.
	removed bool
}

// syncOwedValue returns the value of the inventory's record of an owed sync request, ""
// when there is none.
func (pi passInventory) syncOwedValue() string {
	if pi.inv == nil {
		return ""
	}
	return pi.inv.Annotations[inventory.AnnotationSyncOwed]
}

// newOwedValue returns the value of a new record: the time it is written, with
// nanoseconds, so that a later record of the same Release never has the same value.
func (h *HealthController) newOwedValue() string {
	return h.Clock.Now().UTC().Format(time.RFC3339Nano)
}

// withOwed returns the metadata of an inventory apply (inventoryMeta) that carries the
// record value, or none when value is "".
func withOwed(meta map[string]any, value string) map[string]any {
	if value != "" {
		meta["annotations"] = map[string]any{inventory.AnnotationSyncOwed: value}
	}
	return meta
}

// removeSyncOwed removes the record value of an owed sync request from inv with one
// JSON patch under the field manager convoy-sync-owed. The patch tests the inventory's
// uid (never an inventory that was re-created meanwhile) and the record's value, not the
// resourceVersion, so a concurrent writer of the inventory does not make the record
// outlive its payment. A record that is gone or holds another value (a newer debt, or an
// apply that dropped this one) fails the test: nothing is left to remove, and that is
// success.
func (h *HealthController) removeSyncOwed(ctx context.Context, inv *v1alpha1.ReleaseInventory, value string) error {
	path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(inventory.AnnotationSyncOwed)
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(inv.UID)},
		{"op": "test", "path": path, "value": value},
		{"op": "remove", "path": path},
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	target := &v1alpha1.ReleaseInventory{ObjectMeta: metav1.ObjectMeta{Namespace: inv.Namespace, Name: inv.Name}}
	err = h.Writer.Patch(ctx, target, client.RawPatch(types.JSONPatchType, data), client.FieldOwner(inventory.FieldManagerSyncOwed))
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err) || apierrors.IsNotFound(err): // a failed test is 422 Invalid
		h.logFrom(ctx).V(1).Info("the paid sync record is already gone or replaced", "record", value, "reason", err.Error())
		return nil
	default:
		return fmt.Errorf("removing the record of a paid sync request: %w", err)
	}
}

// owedFor returns what this process knows about the record of an owed sync request of
// key, given the inventory that the pass read. A record that this process did not
// write, or wrote and has forgotten, is unpaid. One that it wrote and the cache does
// not show yet is still its own; one that it removed is forgotten once the cache no
// longer shows it. Without an inventory there is nothing to pay or remove.
func (h *HealthController) owedFor(key string, inv passInventory) owedState {
	h.mu.Lock()
	defer h.mu.Unlock()
	recorded := inv.syncOwedValue()
	st := h.owed[key]
	switch {
	case inv.inv == nil || (recorded == "" && st.removed):
		delete(h.owed, key)
		return owedState{}
	case recorded != "" && recorded != st.value:
		return owedState{value: recorded}
	}
	return st
}

// setOwed stores st for key; a zero st forgets it.
func (h *HealthController) setOwed(key string, st owedState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st == (owedState{}) {
		delete(h.owed, key)
		return
	}
	if h.owed == nil {
		h.owed = map[string]owedState{}
	}
	h.owed[key] = st
}
