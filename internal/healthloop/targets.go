package healthloop

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// trackTargets records what the pass of the Release key reads from cluster (nil: the
// Cluster is missing): the recorded entries when the Release is assessed, and the
// workloads of the hooks that observeHooks reads. The cluster cache keeps the index of
// what each Release reads (clustercache.ClusterCache.Track): it watches their types and
// wakes key when one of them changes (targetChanged).
func (h *HealthController) trackTargets(key string, rel *v1alpha1.Release, cluster *v1alpha1.Cluster, pi passInventory) {
	var refs []clustercache.TargetRef
	if cluster != nil && pi.inv != nil && pi.own != nil {
		refs = make([]clustercache.TargetRef, 0, len(pi.inv.Entries)+len(pi.inv.Hooks))
		if rel.DeletionTimestamp == nil && rel.Spec.HealthAssessment != nil {
			entries, _ := pi.own.RecordedEntries(pi.inv, inventory.FieldManagerInventory)
			for i := range entries {
				e := &entries[i]
				gvr := schema.GroupVersionResource{Group: e.Group, Version: e.Version, Resource: e.Resource}
				if inventory.CheckReference(gvr, e.Namespace, e.Name) != nil {
					continue // never read: the pass judges it Unknown and says why
				}
				refs = append(refs, clustercache.TargetRef{GVR: gvr, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name})
			}
		}
		hooks, _ := pi.own.RecordedHooks(pi.inv, inventory.FieldManagerHookStatus)
		for i := range hooks {
			hk := &hooks[i]
			if !needsPoll(hk) {
				continue
			}
			if gvr, ok := hookWorkloadGVR(hk.WorkloadKind); ok && inventory.CheckReference(gvr, hk.Namespace, hk.WorkloadName) == nil {
				refs = append(refs, clustercache.TargetRef{GVR: gvr, Kind: hk.WorkloadKind, Namespace: hk.Namespace, Name: hk.WorkloadName})
			}
		}
	}
	h.Clusters.Track(key, cluster, refs)
}

// untrackTargets forgets what the Release key reads (deleted, or another shard's).
func (h *HealthController) untrackTargets(key string) {
	h.Clusters.Untrack(key)
}

// targetChanged wakes the Release key, which reads a target object that changed (the
// cluster cache's Watch callback).
func (h *HealthController) targetChanged(key string) {
	if enqueue := h.Enqueue; enqueue != nil {
		targetWakeups.Inc()
		enqueue(key)
	}
}
