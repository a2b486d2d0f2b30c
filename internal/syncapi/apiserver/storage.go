package apiserver

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiserver "github.com/kumodo/convoy-observer/internal/syncapi/server"
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

// healthREST serves GET releases/{name}/health as a rest.Getter: the generic server has
// routed, authenticated and authorized the request (verb get on releases/health) and
// put the namespace in the context; other methods answer 405 there.
type healthREST struct{ e *syncapiserver.Endpoints }

var (
	_ rest.Getter                   = healthREST{}
	_ rest.GroupVersionKindProvider = healthREST{}
)

func (healthREST) New() runtime.Object { return &syncapi.HealthResult{} }
func (healthREST) Destroy()            {}

// GroupVersionKind is the kind that discovery shows for the subresource.
func (healthREST) GroupVersionKind(gv schema.GroupVersion) schema.GroupVersionKind {
	return gv.WithKind(kindHealth)
}

// Get answers the HealthResult of the Release name in the request's namespace.
func (h healthREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	return h.e.Health(ctx, genericapirequest.NamespaceValue(ctx), name)
}

// syncREST serves POST releases/{name}/sync (verb create on releases/sync). It is a
// rest.Connecter rather than a rest.NamedCreater because the request has no body and
// the answer is 202 Accepted: a Creater's handler decodes a body into an object and
// answers 201. The generic server has routed, authenticated and authorized the request
// before Connect and answers 405 for other methods; the namespace and name come from
// it, never from the path again.
type syncREST struct{ e *syncapiserver.Endpoints }

var (
	_ rest.Connecter                = syncREST{}
	_ rest.StorageMetadata          = syncREST{}
	_ rest.GroupVersionKindProvider = syncREST{}
)

func (syncREST) New() runtime.Object { return &syncapi.SyncResponse{} }
func (syncREST) Destroy()            {}

// GroupVersionKind is the kind that discovery shows for the subresource.
func (syncREST) GroupVersionKind(gv schema.GroupVersion) schema.GroupVersionKind {
	return gv.WithKind(kindSync)
}

// ConnectMethods is the one HTTP method of the subresource.
func (syncREST) ConnectMethods() []string { return []string{http.MethodPost} }

// NewConnectOptions: the subresource takes no options and no subpath.
func (syncREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, false, "" }

// Connect answers 202 with the SyncResponse, or the error's metav1.Status.
func (s syncREST) Connect(ctx context.Context, name string, _ runtime.Object, r rest.Responder) (http.Handler, error) {
	namespace := genericapirequest.NamespaceValue(ctx)
	return http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		resp, err := s.e.Sync(req.Context(), namespace, name)
		if err != nil {
			r.Error(err)
			return
		}
		r.Object(http.StatusAccepted, resp)
	}), nil
}

// ProducesMIMETypes: the answer is JSON.
func (syncREST) ProducesMIMETypes(string) []string { return []string{"application/json"} }

// ProducesObject is the body type, for OpenAPI.
func (syncREST) ProducesObject(string) any { return syncapi.SyncResponse{} }

// storageMap returns the storage of the group-version over e.
func storageMap(e *syncapiserver.Endpoints) map[string]rest.Storage {
	return map[string]rest.Storage{
		"releases":                              releasesREST{},
		"releases/" + syncapi.SubresourceSync:   syncREST{e},
		"releases/" + syncapi.SubresourceHealth: healthREST{e},
	}
}
