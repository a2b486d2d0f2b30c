// Package v1alpha1 holds the extensions.convoy.kumodo.io/v1alpha1 API types:
// GlobalHealthRuleSet (cluster-scoped) and HealthRuleSet (namespaced), the CEL health
// rules of docs/design.md, "Rules".
//
// +kubebuilder:object:generate=true
// +groupName=extensions.convoy.kumodo.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "extensions.convoy.kumodo.io", Version: "v1alpha1"}

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
