package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// fieldManager is the field manager of convoy's controller-manager, which the driver
// plays: it owns the workloads, the keys and the recorded fields of the inventory, and
// status.lastAttempted and status.rollout of the Release.
const fieldManager = "convoy-controller-manager"

// driver is the demo's stand-in for convoy's controller-manager, for one Release. It is
// NOT a product component and renders nothing: it applies the fixed objects of a
// render (workloads.go) to the target cluster wave by wave, runs a hook Job, records
// everything in the ReleaseInventory by Server-Side Apply as convoy-controller-manager,
// and writes status.lastAttempted.renderRef and status.rollout.startedAt — the inputs
// that the observer's health loop reads. When to advance (after a /sync wake-up) is up
// to the scenario (scenario.go).
//
// Here the management cluster and the target cluster are the same local cluster: the
// Release's Cluster has no kubeconfigSecretRef.
type driver struct {
	c         client.Client
	namespace string
	name      string
	uid       types.UID

	// entries and hooks are what the driver records, in the order it applied them.
	entries []v1alpha1.InventoryEntry
	hooks   []v1alpha1.HookEntry
}

// newDriver returns the driver of the Release rel.
func newDriver(c client.Client, rel *v1alpha1.Release) *driver {
	return &driver{c: c, namespace: rel.Namespace, name: rel.Name, uid: rel.UID}
}

// startRollout starts rolling out r: status.lastAttempted.renderRef = r.Ref and
// status.rollout.startedAt = now.
func (d *driver) startRollout(ctx context.Context, r *render) error {
	ac := acv1alpha1.Release(d.name, d.namespace).WithStatus(acv1alpha1.ReleaseStatus().
		WithLastAttempted(acv1alpha1.AttemptStatus().WithRenderRef(r.Ref)).
		WithRollout(acv1alpha1.RolloutStatus().WithStartedAt(metav1.NewTime(time.Now().UTC().Truncate(time.Second)))))
	if err := d.c.Status().Apply(ctx, ac, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the status of Release %s/%s: %w", d.namespace, d.name, err)
	}
	return nil
}

// applyWave applies the objects of wave w of r to the target cluster, then records them
// with renderRef r.Ref (the entries of other waves stay recorded as they were). It
// returns the objects applied.
func (d *driver) applyWave(ctx context.Context, r *render, w int32) ([]object, error) {
	objs := r.wave(w)
	for _, o := range objs {
		if err := d.c.Apply(ctx, o.Apply, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying %s %s: %w", o.Kind, objectName(o.Namespace, o.Name), err)
		}
		d.record(v1alpha1.InventoryEntry{
			Group: o.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
			Version: o.Version, Resource: o.Resource, Wave: &o.Wave, RenderRef: r.Ref,
		})
	}
	return objs, d.writeInventory(ctx)
}

// runHook applies the Job of h and records the hook, armed now.
func (d *driver) runHook(ctx context.Context, h hookSpec) error {
	if err := d.c.Apply(ctx, h.Job, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the Job of hook %s: %w", h.Name, err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	entry := v1alpha1.HookEntry{
		Name: h.Name, WorkloadKind: "Job", Namespace: *h.Job.Namespace, WorkloadName: *h.Job.Name,
		CreatedAt: &now, Timeout: h.Timeout.String(),
	}
	replaced := false
	for i := range d.hooks {
		if d.hooks[i].Name == h.Name {
			d.hooks[i], replaced = entry, true
		}
	}
	if !replaced {
		d.hooks = append(d.hooks, entry)
	}
	return d.writeInventory(ctx)
}

// record adds e to the recorded entries, or replaces the entry with the same keys.
func (d *driver) record(e v1alpha1.InventoryEntry) {
	for i := range d.entries {
		old := &d.entries[i]
		if old.Group == e.Group && old.Kind == e.Kind && old.Namespace == e.Namespace && old.Name == e.Name {
			*old = e
			return
		}
	}
	d.entries = append(d.entries, e)
}

// writeInventory applies the ReleaseInventory with every recorded entry and hook: the
// controller-manager's fields only, so that Server-Side Apply leaves the observer's
// fields (state, message, …) alone and an entry left out would vanish.
func (d *driver) writeInventory(ctx context.Context) error {
	ac := acv1alpha1.ReleaseInventory(d.name, d.namespace).WithOwnerReferences(metav1ac.OwnerReference().
		WithAPIVersion(v1alpha1.GroupVersion.String()).WithKind("Release").WithName(d.name).WithUID(d.uid).
		WithController(true).WithBlockOwnerDeletion(true))
	for i := range d.entries {
		ac.WithEntries(inventory.RecordEntry(&d.entries[i]))
	}
	for i := range d.hooks {
		ac.WithHooks(inventory.RecordHook(&d.hooks[i]))
	}
	if err := d.c.Apply(ctx, ac, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ReleaseInventory %s/%s: %w", d.namespace, d.name, err)
	}
	return nil
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
