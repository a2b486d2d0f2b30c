package healthloop

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/controller/base"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// targetKey is one object of one target cluster, as an inventory records it.
type targetKey struct {
	cluster                      string // the Cluster's namespace/name
	group, kind, namespace, name string
}

// targetIndex maps each target object that a Release reads (a recorded inventory entry
// or a polled hook's workload) to the keys of the Releases that read it, so a change of
// the object wakes exactly those Releases. Each pass replaces its Release's part from
// the inventory it read (level-triggered): a Release reads what its last pass saw.
type targetIndex struct {
	mu       sync.Mutex
	objects  map[targetKey]map[string]struct{}
	releases map[string][]targetKey
}

// set replaces release's objects with keys (nil: none).
func (x *targetIndex) set(release string, keys []targetKey) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.objects == nil {
		x.objects = map[targetKey]map[string]struct{}{}
		x.releases = map[string][]targetKey{}
	}
	for _, k := range x.releases[release] {
		if m := x.objects[k]; m != nil {
			delete(m, release)
			if len(m) == 0 {
				delete(x.objects, k)
			}
		}
	}
	if len(keys) == 0 {
		delete(x.releases, release)
		return
	}
	x.releases[release] = keys
	for _, k := range keys {
		m := x.objects[k]
		if m == nil {
			m = map[string]struct{}{}
			x.objects[k] = m
		}
		m[release] = struct{}{}
	}
}

// lookup returns the sorted keys of the Releases that read k.
func (x *targetIndex) lookup(k targetKey) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.objects[k]))
	for r := range x.objects[k] {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// trackTargets records what the pass of the Release key reads from cluster (nil: the
// Cluster is missing): the recorded entries when the Release is assessed, and the
// workloads of the hooks that pollHooks polls. The index wakes key when one of them
// changes; the cluster cache (when it is a clustercache.TargetTracker) watches their types.
func (h *HealthController) trackTargets(key string, rel *v1alpha1.Release, cluster *v1alpha1.Cluster, pi passInventory) {
	var refs []clustercache.TargetRef
	if cluster != nil && pi.inv != nil && pi.own != nil {
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
			if gvr, ok := hookWorkloadGVR(hk.WorkloadKind); ok {
				refs = append(refs, clustercache.TargetRef{GVR: gvr, Kind: hk.WorkloadKind, Namespace: hk.Namespace, Name: hk.WorkloadName})
			}
		}
	}
	var keys []targetKey
	if cluster != nil {
		ck := base.KeyOf(cluster)
		keys = make([]targetKey, 0, len(refs))
		for _, r := range refs {
			keys = append(keys, targetKey{cluster: ck, group: r.GVR.Group, kind: r.Kind, namespace: r.Namespace, name: r.Name})
		}
	}
	h.targets.set(key, keys)
	if t, ok := h.Clusters.(clustercache.TargetTracker); ok {
		t.Track(key, cluster, refs)
	}
}

// untrackTargets forgets what the Release key reads (deleted, or another shard's).
func (h *HealthController) untrackTargets(key string) {
	h.targets.set(key, nil)
	if t, ok := h.Clusters.(clustercache.TargetTracker); ok {
		t.Untrack(key)
	}
}

// targetChanged wakes the Releases that read the object of ev.
func (h *HealthController) targetChanged(ev clustercache.ObjectEvent) {
	enqueue := h.Enqueue
	if enqueue == nil {
		return
	}
	for _, r := range h.targets.lookup(targetKey{cluster: ev.Cluster, group: ev.Group, kind: ev.Kind, namespace: ev.Namespace, name: ev.Name}) {
		targetWakeups.Inc()
		enqueue(r)
	}
}
