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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "convoy.kumodo.io", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name that the generated apply
	// configurations (package applyconfiguration) use.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
