// Package v1alpha1 holds the extensions.convoy.kumodo.io/v1alpha1 API types:
// GlobalHealthRuleSet (cluster-scoped) and HealthRuleSet (namespaced), the CEL health
// rules of docs/design.md, "Rules".
//
// +kubebuilder:object:generate=true
// +groupName=extensions.convoy.kumodo.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "extensions.convoy.kumodo.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
