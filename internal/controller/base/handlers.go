package base

import (
	"context"
	"fmt"
	"reflect"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// ReleaseChanged reports whether a Release update adds a key (CONTRACT §2): a change of
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

// InventoryChanged reports whether a ReleaseInventory update adds a key (CONTRACT §2):
// only fields that the controller-manager owns count, so the observer's own writes
// (state, message, firstUnhealthy, assessedRenderRef; hook state, message, finishedAt)
// never wake the loop. An informer resync (same resourceVersion) counts.
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

// KeyOf returns the namespace/name key of obj.
func KeyOf(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// EventSource registers the health loop's event handlers (CONTRACT §2, "Events that
// add a key") on the informers of a controller-runtime cache.
type EventSource struct {
	// Cache supplies the informers; Reader lists Releases to fan rule-set and Cluster
	// events out to (usually the same cache).
	Cache  cache.Informers
	Reader client.Reader
	// Enqueue adds a key to the loop's queue.
	Enqueue func(key string)
	Log     logr.Logger
	// Indexer, when set (the manager's field indexer, over the same cache as Reader),
	// indexes Releases by spec.clusterRef.name, so a Cluster event lists only the
	// Releases that reference it.
	Indexer client.FieldIndexer

	indexed bool
}

// ReleaseClusterField is the field index of Releases by spec.clusterRef.name.
const ReleaseClusterField = "spec.clusterRef.name"

// Register adds the handlers for Release, ReleaseInventory, GlobalHealthRuleSet,
// HealthRuleSet and Cluster, and returns their HasSynced functions.
func (s *EventSource) Register(ctx context.Context) ([]func() bool, error) {
	if s.Indexer != nil {
		if err := s.Indexer.IndexField(ctx, &v1alpha1.Release{}, ReleaseClusterField, func(o client.Object) []string {
			if r, ok := o.(*v1alpha1.Release); ok {
				return []string{r.Spec.ClusterRef.Name}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("indexing Releases by Cluster: %w", err)
		}
		s.indexed = true
	}
	var synced []func() bool
	add := func(obj client.Object, h toolscache.ResourceEventHandler) error {
		inf, err := s.Cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("handler for %T: %w", obj, err)
		}
		synced = append(synced, reg.HasSynced)
		return nil
	}
	self := func(obj any) {
		if o := objectOf(obj); o != nil {
			s.Enqueue(KeyOf(o))
		}
	}
	if err := add(&v1alpha1.Release{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    self,
		DeleteFunc: self,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1alpha1.Release)
			c, ok2 := cur.(*v1alpha1.Release)
			if ok1 && ok2 && ReleaseChanged(o, c) {
				self(cur)
			}
		},
	}); err != nil {
		return nil, err
	}
	if err := add(&v1alpha1.ReleaseInventory{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    self,
		DeleteFunc: self,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1alpha1.ReleaseInventory)
			c, ok2 := cur.(*v1alpha1.ReleaseInventory)
			if ok1 && ok2 && InventoryChanged(o, c) {
				self(cur)
			}
		},
	}); err != nil {
		return nil, err
	}
	all := func(any) { s.enqueueReleases(ctx, "", "") }
	if err := add(&extv1alpha1.GlobalHealthRuleSet{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc: all, DeleteFunc: all, UpdateFunc: func(_, cur any) { all(cur) },
	}); err != nil {
		return nil, err
	}
	inNamespace := func(obj any) {
		if o := objectOf(obj); o != nil {
			s.enqueueReleases(ctx, o.GetNamespace(), "")
		}
	}
	if err := add(&extv1alpha1.HealthRuleSet{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc: inNamespace, DeleteFunc: inNamespace, UpdateFunc: func(_, cur any) { inNamespace(cur) },
	}); err != nil {
		return nil, err
	}
	ofCluster := func(obj any) {
		if o := objectOf(obj); o != nil {
			s.enqueueReleases(ctx, o.GetNamespace(), o.GetName())
		}
	}
	if err := add(&v1alpha1.Cluster{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    ofCluster,
		DeleteFunc: ofCluster,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1alpha1.Cluster)
			c, ok2 := cur.(*v1alpha1.Cluster)
			if ok1 && ok2 && ClusterChanged(o, c) {
				ofCluster(cur)
			}
		},
	}); err != nil {
		return nil, err
	}
	return synced, nil
}

// EnqueueReleasesOf adds the keys of the Releases that reference the Cluster
// namespace/name (a rebuilt cluster: its kubeconfig Secret changed).
func (s *EventSource) EnqueueReleasesOf(ctx context.Context, namespace, cluster string) {
	s.enqueueReleases(ctx, namespace, cluster)
}

// enqueueReleases adds the keys of the Releases of namespace ("" = all namespaces) that
// reference cluster ("" = any).
func (s *EventSource) enqueueReleases(ctx context.Context, namespace, cluster string) {
	list := &v1alpha1.ReleaseList{}
	// Read-only: no deep copy of every Release for a fleet-wide event.
	opts := []client.ListOption{client.InNamespace(namespace), client.UnsafeDisableDeepCopy}
	if cluster != "" && s.indexed {
		opts = append(opts, client.MatchingFields{ReleaseClusterField: cluster})
	}
	if err := s.Reader.List(ctx, list, opts...); err != nil {
		s.Log.Error(err, "listing Releases to enqueue", "namespace", namespace, "cluster", cluster)
		return
	}
	for i := range list.Items {
		if cluster == "" || list.Items[i].Spec.ClusterRef.Name == cluster {
			s.Enqueue(KeyOf(&list.Items[i]))
		}
	}
}

// objectOf unwraps a deletion tombstone and returns the object, or nil.
func objectOf(obj any) client.Object {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	co, ok := o.(client.Object)
	if !ok {
		return nil
	}
	return co
}
