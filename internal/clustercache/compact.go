package clustercache

import (
	"bytes"
	"fmt"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kumodo/convoy-observer/health"
)

// compactObject is a target object as the cache keeps it: its JSON (after
// stripForCache and the rules' fields) and the metadata that the store's key function
// and the change handler read (namespace, name, resourceVersion), 96 bytes besides the
// JSON. An unstructured object holds every field in its own map or string and costs
// about three times its JSON; the JSON is decoded again on every read, which costs
// about what the deep copy that a read of an unstructured object needs anyway.
type compactObject struct {
	namespace, name, resourceVersion string
	kind                             string
	raw                              []byte
}

// GetObjectMeta makes compactObject an object to meta.Accessor (the store's key
// function, the change handler): a metadata of its namespace, name and resourceVersion,
// made on each call rather than kept (an ObjectMeta is 232 bytes).
func (o *compactObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.namespace, Name: o.name, ResourceVersion: o.resourceVersion}
}

// GetResourceVersion returns the object's resourceVersion.
func (o *compactObject) GetResourceVersion() string { return o.resourceVersion }

// compactForCache returns the informers' transform: stripForCache, then only the
// fields (nil: all; health.Fields.Prune), then compactObject. A typed object (a
// built-in type watched in protobuf, of kind gvk) is encoded from its Go object, only
// its kept fields (health.Fields.MarshalKept): the same JSON as the kept fields of the
// API server's, with half the time and allocations of converting the object to
// unstructured content and encoding that (BenchmarkCompactDeployment, a transform and a
// read). Anything else (a tombstone, an object that does not encode) is kept as it is.
func compactForCache(fields *health.Fields, gvk schema.GroupVersionKind) toolscache.TransformFunc {
	return func(obj any) (any, error) { return compact(obj, fields, gvk) }
}

func compact(obj any, fields *health.Fields, gvk schema.GroupVersionKind) (any, error) {
	obj, err := stripForCache(obj)
	if err != nil {
		return obj, err
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		fields.Prune(u.Object)
		raw, err := u.MarshalJSON()
		if err != nil {
			return obj, nil //nolint:nilerr // kept as it is: the cache still works, only larger
		}
		// The encoder's buffer has room to spare.
		return newCompactObject(u, u.GetKind(), bytes.Clone(raw)), nil
	}
	typed, isObject := obj.(runtime.Object)
	a, err := meta.Accessor(obj)
	if !isObject || gvk.Empty() || err != nil {
		return obj, nil //nolint:nilerr // not an object: kept as it is
	}
	// A built-in type watched in protobuf (protobuf.go): a decoded protobuf object has
	// no apiVersion and kind.
	typed.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := fields.MarshalKept(typed) // a slice of its own length
	if err != nil {
		return obj, nil //nolint:nilerr // kept as it is: the cache still works, only larger
	}
	return newCompactObject(a, gvk.Kind, raw), nil
}

// newCompactObject keeps raw, the JSON of the object of metadata a, in a compactObject;
// the namespace and kind are shared by the type's objects.
func newCompactObject(a metav1.Object, kind string, raw []byte) *compactObject {
	return &compactObject{namespace: unique.Make(a.GetNamespace()).Value(), name: a.GetName(),
		resourceVersion: a.GetResourceVersion(), kind: unique.Make(kind).Value(), raw: raw}
}

// cachedUnstructured returns a new unstructured object for what the cache holds: a
// compactObject decoded, or a copy of an unstructured one.
func cachedUnstructured(obj any) (*unstructured.Unstructured, error) {
	switch o := obj.(type) {
	case *compactObject:
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(o.raw); err != nil {
			return nil, fmt.Errorf("decoding the cached %s %s: %w", o.kind, o.name, err)
		}
		return u, nil
	case *unstructured.Unstructured:
		return o.DeepCopy(), nil
	}
	return nil, fmt.Errorf("unexpected object %T in the target cache", obj)
}

// cachedKind returns the kind of what the cache holds ("" when unknown).
func cachedKind(obj any) string {
	switch o := obj.(type) {
	case *compactObject:
		return o.kind
	case *unstructured.Unstructured:
		return o.GetKind()
	}
	return ""
}

// lastAppliedAnnotation is kubectl's copy of the last applied object; rules never see it
// (health.Evaluator removes it on every path) and it doubles an object's size.
const lastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// stripForCache drops from an object what rules never read before it is cached:
// metadata.managedFields and the last-applied-configuration annotation.
func stripForCache(obj any) (any, error) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t, nil
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil //nolint:nilerr // not an object: kept as it is
	}
	a.SetManagedFields(nil)
	if ann := a.GetAnnotations(); ann != nil {
		if _, ok := ann[lastAppliedAnnotation]; ok {
			delete(ann, lastAppliedAnnotation)
			if len(ann) == 0 {
				ann = nil
			}
			a.SetAnnotations(ann)
		}
	}
	return obj, nil
}
