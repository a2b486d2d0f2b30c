// Package v1alpha1 holds the convoy.kumodo.io/v1alpha1 API types that convoy-observer
// reads and writes: Release, ReleaseInventory and Cluster.
//
// The controller-manager of convoy owns the spec of these objects and the keys of the
// inventory; the observer owns only the fields named in docs/design.md, "Objects and owners" (the Healthy
// condition and healthSummary of a Release; state, message, firstUnhealthy and
// assessedRenderRef of inventory entries; state, message and finishedAt of hooks), and
// writes them with Server-Side Apply under its own field managers.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=convoy.kumodo.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "convoy.kumodo.io", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name that the generated apply
	// configurations (package applyconfiguration) use.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the types of this package with a runtime.Scheme (each
	// types file adds its own, knownTypes) and the meta types of GroupVersion, as
	// apimachinery's API packages do; an API package needs no controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes is the registration of objs under GroupVersion, for SchemeBuilder.
func knownTypes(objs ...runtime.Object) func(*runtime.Scheme) error {
	return func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objs...)
		return nil
	}
}
