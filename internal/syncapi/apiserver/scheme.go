package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// GroupVersion is the group-version that convoy-api serves.
var GroupVersion = schema.GroupVersion{Group: syncapi.Group, Version: syncapi.Version}

// Scheme knows the kinds of GroupVersion and the meta types every API server needs;
// Codecs serializes them.
var (
	Scheme = runtime.NewScheme()
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	Scheme.AddKnownTypes(GroupVersion, &Release{})
	Scheme.AddKnownTypeWithName(GroupVersion.WithKind(kindSync), &syncapi.SyncResponse{})
	Scheme.AddKnownTypeWithName(GroupVersion.WithKind(kindHealth), &syncapi.HealthResult{})
	metav1.AddToGroupVersion(Scheme, GroupVersion)
}

// Release is the kind of the resource releases of subresources.convoy.kumodo.io in
// discovery: the parent of the subresources sync and health, named like the Release of
// convoy.kumodo.io whose subresources they are. The resource itself has no verbs; no
// object of this kind is ever served.
//
// +k8s:openapi-gen=true
type Release struct {
	metav1.TypeMeta `json:",inline"`
}

// Kinds of the subresources in discovery and OpenAPI: their bodies are
// syncapi.SyncResponse and syncapi.HealthResult.
const (
	kindSync   = "SyncResponse"
	kindHealth = "HealthResponse"
)

// DeepCopyObject copies the object (it holds only its TypeMeta).
func (in *Release) DeepCopyObject() runtime.Object { out := *in; return &out }

// OpenAPIModelName names the kind in OpenAPI.
func (Release) OpenAPIModelName() string { return syncapi.OpenAPIModelPrefix + "Release" }
