package healthloop

import (
	"context"
	"fmt"
	"reflect"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// ReleaseChanged reports whether a Release update adds a key (docs/design.md, "Events that add a key"): a change of
// metadata.generation, labels or deletionTimestamp, or an informer resync (same
// resourceVersion). Status writes and the sync annotation alone do not.
func ReleaseChanged(old, cur *v1alpha1.Release) bool {
	if old.ResourceVersion == cur.ResourceVersion {
		return true // resync
	}
	return old.Generation != cur.Generation ||
		!reflect.DeepEqual(old.Labels, cur.Labels) ||
		!old.DeletionTimestamp.Equal(cur.DeletionTimestamp)
}

// InventoryChanged reports whether a ReleaseInventory update adds a key (docs/design.md, "Events that add a key"):
// only fields that the controller-manager owns count, so the observer's own writes
// (state, message, firstUnhealthy, assessedRenderRef, decidedBy, rulesApplied, diagnosis; hook
// state, message, finishedAt) never wake the loop. An informer resync (same
// resourceVersion) counts.
func InventoryChanged(old, cur *v1alpha1.ReleaseInventory) bool {
	if old.ResourceVersion == cur.ResourceVersion {
		return true
	}
	if !old.DeletionTimestamp.Equal(cur.DeletionTimestamp) {
		return true
	}
	return !reflect.DeepEqual(recordedEntryFields(old), recordedEntryFields(cur)) ||
		!reflect.DeepEqual(recordedHookFields(old), recordedHookFields(cur))
}

type entryFields struct {
	Version, Resource, RenderRef string
	Wave                         int32
	HasWave                      bool
}

func recordedEntryFields(inv *v1alpha1.ReleaseInventory) map[string]entryFields {
	m := make(map[string]entryFields, len(inv.Entries))
	for _, e := range inv.Entries {
		k := e.Group + "\x00" + e.Kind + "\x00" + e.Namespace + "\x00" + e.Name
		m[k] = entryFields{Version: e.Version, Resource: e.Resource, RenderRef: e.RenderRef, Wave: e.GetWave(), HasWave: e.Wave != nil}
	}
	return m
}

type hookFields struct {
	WorkloadKind, Namespace, WorkloadName, CreatedAt, Timeout string
}

func recordedHookFields(inv *v1alpha1.ReleaseInventory) map[string]hookFields {
	m := make(map[string]hookFields, len(inv.Hooks))
	for _, h := range inv.Hooks {
		f := hookFields{WorkloadKind: h.WorkloadKind, Namespace: h.Namespace, WorkloadName: h.WorkloadName}
		if h.CreatedAt != nil {
			f.CreatedAt = h.CreatedAt.UTC().String()
		}
		f.Timeout = h.Timeout
		m[h.Name] = f
	}
	return m
}

// ClusterChanged reports whether a Cluster update adds the keys of its Releases: a spec
// change (generation) or a resync.
func ClusterChanged(old, cur *v1alpha1.Cluster) bool {
	return old.ResourceVersion == cur.ResourceVersion || old.Generation != cur.Generation ||
		!reflect.DeepEqual(old.Spec, cur.Spec)
}

// keyOf returns the namespace/name key of obj.
func keyOf(obj client.Object) string {
	return toolscache.MetaObjectToName(obj).String()
}

// ReleasePredicate is the filter of Release events (docs/design.md, "Events that add a key"): create and delete,
// and the updates that ReleaseChanged reports.
func ReleasePredicate() predicate.Predicate {
	return predicate.TypedFuncs[client.Object]{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.Release)
		c, ok2 := e.ObjectNew.(*v1alpha1.Release)
		return ok1 && ok2 && ReleaseChanged(o, c)
	}}
}

// InventoryPredicate is the filter of ReleaseInventory events (docs/design.md, "Events that add a key"): create and
// delete, and the updates that InventoryChanged reports.
func InventoryPredicate() predicate.Predicate {
	return predicate.TypedFuncs[client.Object]{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.ReleaseInventory)
		c, ok2 := e.ObjectNew.(*v1alpha1.ReleaseInventory)
		return ok1 && ok2 && InventoryChanged(o, c)
	}}
}

// ClusterPredicate is the filter of Cluster events (docs/design.md, "Events that add a key"): create and delete, and
// the updates that ClusterChanged reports.
func ClusterPredicate() predicate.Predicate {
	return predicate.TypedFuncs[client.Object]{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.Cluster)
		c, ok2 := e.ObjectNew.(*v1alpha1.Cluster)
		return ok1 && ok2 && ClusterChanged(o, c)
	}}
}

// ReleaseClusterField is the field index of Releases by spec.clusterRef.name.
const ReleaseClusterField = "spec.clusterRef.name"

// IndexReleasesByCluster adds the ReleaseClusterField index to the manager's cache, so a
// Cluster event lists only the Releases that reference it.
func IndexReleasesByCluster(ctx context.Context, indexer client.FieldIndexer) error {
	err := indexer.IndexField(ctx, &v1alpha1.Release{}, ReleaseClusterField, func(o client.Object) []string {
		if r, ok := o.(*v1alpha1.Release); ok {
			return []string{r.Spec.ClusterRef.Name}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing Releases by Cluster: %w", err)
	}
	return nil
}

// ReleaseFanOut maps events of other objects to the keys of the Releases they concern
// (docs/design.md, "Events that add a key"): a GlobalHealthRuleSet to every Release, a HealthRuleSet to the Releases
// of its namespace, a Cluster to the Releases that reference it.
type ReleaseFanOut struct {
	// Reader lists Releases: the manager's cache, with the ReleaseClusterField index.
	Reader client.Reader
	Log    logr.Logger
}

// All maps any event to every Release.
func (f ReleaseFanOut) All(ctx context.Context, _ client.Object) []reconcile.Request {
	return f.Releases(ctx, "", "")
}

// InNamespace maps an event of obj to the Releases of its namespace.
func (f ReleaseFanOut) InNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	return f.Releases(ctx, obj.GetNamespace(), "")
}

// OfCluster maps an event of the Cluster obj to the Releases that reference it.
func (f ReleaseFanOut) OfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	return f.Releases(ctx, obj.GetNamespace(), obj.GetName())
}

// Releases returns the requests of the Releases of namespace ("" = all namespaces) that
// reference cluster ("" = any). A failed list is logged and maps to none.
func (f ReleaseFanOut) Releases(ctx context.Context, namespace, cluster string) []reconcile.Request {
	list := &v1alpha1.ReleaseList{}
	// Read-only: no deep copy of every Release for a fleet-wide event.
	opts := []client.ListOption{client.InNamespace(namespace), client.UnsafeDisableDeepCopy}
	if cluster != "" {
		opts = append(opts, client.MatchingFields{ReleaseClusterField: cluster})
	}
	if err := f.Reader.List(ctx, list, opts...); err != nil {
		f.Log.Error(err, "listing Releases to enqueue", "namespace", namespace, "cluster", cluster)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		if cluster == "" || list.Items[i].Spec.ClusterRef.Name == cluster {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}
