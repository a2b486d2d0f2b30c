package apiserver

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// releasesREST is the parent resource "releases" of the subresources: the installer of
// k8s.io/apiserver needs one for the scope (namespaced) and the kind. It implements no
// verb, so it serves nothing and discovery lists it without verbs.
type releasesREST struct{}

var (
	_ rest.Storage = releasesREST{}
	_ rest.Scoper  = releasesREST{}
)

func (releasesREST) New() runtime.Object     { return &Release{} }
func (releasesREST) Destroy()                {}
func (releasesREST) NamespaceScoped() bool   { return true }
func (releasesREST) GetSingularName() string { return "release" }

// subresourceREST serves one subresource (sync or health) of releases as a
// rest.Connecter: the generic server has authenticated and authorized the request
// (verb create for POST, get for GET, on releases/<subresource>) before Connect is
// called, and the syncapi.Handler then answers exactly as docs/design.md, "Sync and health endpoints" says (its
// status codes, bodies and metav1.Status errors).
type subresourceREST struct {
	kind     string
	method   string
	produces any
	handler  http.Handler
}

var (
	_ rest.Connecter                = &subresourceREST{}
	_ rest.StorageMetadata          = &subresourceREST{}
	_ rest.GroupVersionKindProvider = &subresourceREST{}
)

func (s *subresourceREST) New() runtime.Object {
	if s.kind == "SyncResponse" {
		return &SyncResponse{}
	}
	return &HealthResponse{}
}

func (s *subresourceREST) Destroy() {}

// GroupVersionKind is the kind that discovery shows for the subresource.
func (s *subresourceREST) GroupVersionKind(gv schema.GroupVersion) schema.GroupVersionKind {
	return gv.WithKind(s.kind)
}

// ConnectMethods is the one HTTP method of the subresource; others answer 405.
func (s *subresourceREST) ConnectMethods() []string { return []string{s.method} }

// NewConnectOptions: the subresources take no options and no subpath.
func (s *subresourceREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }

// Connect returns the Handler, which reads the namespace and name from the path again.
func (s *subresourceREST) Connect(context.Context, string, runtime.Object, rest.Responder) (http.Handler, error) {
	return s.handler, nil
}

// ProducesMIMETypes: the answers are JSON.
func (s *subresourceREST) ProducesMIMETypes(string) []string { return []string{"application/json"} }

// ProducesObject is the body type, for OpenAPI.
func (s *subresourceREST) ProducesObject(string) any { return s.produces }

// storageMap returns the storage of the group-version for h.
func storageMap(h http.Handler) map[string]rest.Storage {
	return map[string]rest.Storage{
		"releases": releasesREST{},
		"releases/" + syncapi.SubresourceSync: &subresourceREST{
			kind: "SyncResponse", method: http.MethodPost, produces: syncapi.SyncResponse{}, handler: h,
		},
		"releases/" + syncapi.SubresourceHealth: &subresourceREST{
			kind: "HealthResponse", method: http.MethodGet, produces: syncapi.HealthResponse{}, handler: h,
		},
	}
}
