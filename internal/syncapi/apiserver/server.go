package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/scheme"
	syncapiserver "github.com/kumodo/convoy-observer/internal/syncapi/server"
)

// Server is convoy-api: a k8s.io/apiserver generic API server that serves the group
// subresources.convoy.kumodo.io/v1alpha1 (discovery, OpenAPI v2 and v3, the
// subresources sync and health of releases), /healthz, /livez and /readyz, with
// delegated authentication and authorization.
type Server struct {
	// Endpoints answers the subresources once a request is authorized.
	Endpoints *syncapiserver.Endpoints

	generic *genericapiserver.GenericAPIServer
	cache   cache.Cache
	synced  atomic.Bool
}

// New builds convoy-api from completed, valid options (Options.Complete, Validate). It
// reads the front-proxy and client CAs (ConfigMap kube-system/extension-apiserver-
// authentication) and prepares the informers; Run starts everything.
func New(o *Options) (*Server, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	gc := newConfig()
	if err := o.SecureServing.ApplyTo(&gc.SecureServing, &gc.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&gc.Authentication, gc.SecureServing, gc.OpenAPIConfig); err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&gc.Authorization); err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	gc.Authorization.Authorizer = loggingAuthorizer{gc.Authorization.Authorizer}
	// The generic server's own request log (httplog) logs at -v=3; Endpoints logs every
	// authorized request with its user at the default level.

	c, err := cache.New(cfg, cache.Options{
		Scheme:                      scheme.New(),
		ReaderFailOnMissingInformer: true,
		ByObject: map[client.Object]cache.ByObject{
			// /health needs a Release's existence and status.lastAttempted only.
			&v1alpha1.Release{}: {Transform: cache.TransformStripManagedFields()},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the informer cache: %w", err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("building the client for %s: %w", cfg.Host, err)
	}
	e := syncapiserver.NewEndpoints(direct)
	// /health reads Releases and ReleaseInventories only (decidedBy and rulesApplied are
	// recorded in the inventory): no rule set, Cluster, Secret or target object.
	e.Reader, e.Fallback = c, direct

	generic, err := newGeneric(gc, e)
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoints: e, generic: generic, cache: c}
	if err := generic.AddPostStartHook("start-release-informers", s.startCache); err != nil {
		return nil, err
	}
	clientCA := gc.SecureServing.ClientCA
	if err := generic.AddReadyzChecks(healthz.NamedCheck("release-informers", func(*http.Request) error {
		if !s.synced.Load() {
			return errors.New("the informers of Releases and ReleaseInventories have not synced yet")
		}
		return nil
	}), healthz.NamedCheck("client-ca", func(*http.Request) error {
		// Until the ConfigMap kube-system/extension-apiserver-authentication is read,
		// client certificates (the kube-apiserver's front-proxy one included) pass as
		// anonymous.
		if clientCA == nil || len(clientCA.CurrentCABundleContent()) == 0 {
			return errors.New("the client and front-proxy CAs have not been read yet")
		}
		return nil
	})); err != nil {
		return nil, err
	}
	return s, nil
}

// newConfig is the generic server's configuration without serving, authentication or
// authorization: the group's codecs, version and OpenAPI documents.
func newConfig() *genericapiserver.Config {
	gc := genericapiserver.NewConfig(Codecs)
	gc.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	namer := openapinamer.NewDefinitionNamer(Scheme)
	gc.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(GetOpenAPIDefinitions, namer)
	gc.OpenAPIConfig.Info.Title = "convoy-api"
	gc.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(GetOpenAPIDefinitions, namer)
	gc.OpenAPIV3Config.Info.Title = "convoy-api"
	return gc
}

// newGeneric builds the generic server of gc with the group installed over e.
func newGeneric(gc *genericapiserver.Config, e *syncapiserver.Endpoints) (*genericapiserver.GenericAPIServer, error) {
	generic, err := gc.Complete(nil).New("convoy-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	info := genericapiserver.NewDefaultAPIGroupInfo(GroupVersion.Group, Scheme, runtime.NewParameterCodec(Scheme), Codecs)
	info.VersionedResourcesStorageMap[GroupVersion.Version] = storageMap(e)
	if err := generic.InstallAPIGroup(&info); err != nil {
		return nil, fmt.Errorf("installing %s: %w", GroupVersion, err)
	}
	return generic, nil
}

// NewUnauthenticatedHandler returns convoy-api's routes over e (discovery, OpenAPI,
// the subresources, the probes) exactly as Server serves them, but without TLS,
// authentication or authorization: every request is served. It is for tests that
// call convoy-api in-process (httptest.NewServer), never for a listener others reach.
func NewUnauthenticatedHandler(e *syncapiserver.Endpoints) (http.Handler, error) {
	gc := newConfig()
	gc.LoopbackClientConfig, gc.ExternalAddress = &rest.Config{}, "127.0.0.1:443"
	generic, err := newGeneric(gc, e)
	if err != nil {
		return nil, err
	}
	generic.PrepareRun() // installs OpenAPI and the probes, as Run does
	return generic.Handler, nil
}

// startCache starts the informers of Releases and ReleaseInventories (registered first,
// so that no request waits for one to start) and marks them synced for /readyz.
func (s *Server) startCache(ctx genericapiserver.PostStartHookContext) error {
	for _, obj := range []client.Object{&v1alpha1.Release{}, &v1alpha1.ReleaseInventory{}} {
		if _, err := s.cache.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("informer of %T: %w", obj, err)
		}
	}
	go func() {
		if err := s.cache.Start(ctx); err != nil {
			klog.ErrorS(err, "the informer cache stopped")
		}
	}()
	go func() {
		if s.cache.WaitForCacheSync(ctx) {
			s.synced.Store(true)
			klog.InfoS("informers of Releases and ReleaseInventories synced")
		}
	}()
	return nil
}

// Addr is the address convoy-api listens on.
func (s *Server) Addr() net.Addr { return s.generic.SecureServingInfo.Listener.Addr() }

// Run serves until ctx is done, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	klog.InfoS("serving", "address", s.Addr().String(), "group", GroupVersion.String())
	return s.generic.PrepareRun().RunWithContext(ctx)
}

// loggingAuthorizer logs every denied request of a resource with its user and attributes
// (denied non-resource requests, such as the aggregator's anonymous discovery probes, at
// -v=1; authorized requests are logged by Endpoints, with their status).
type loggingAuthorizer struct{ authorizer.Authorizer }

func (a loggingAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := a.Authorizer.Authorize(ctx, attrs)
	if d != authorizer.DecisionAllow {
		user, groups := "", []string(nil)
		if u := attrs.GetUser(); u != nil {
			user, groups = u.GetName(), u.GetGroups()
		}
		what, log := attrs.GetPath(), klog.V(1) // discovery probes of the aggregator: anonymous
		if attrs.IsResourceRequest() {
			what, log = strings.Trim(attrs.GetResource()+"/"+attrs.GetSubresource(), "/")+" "+attrs.GetNamespace()+"/"+attrs.GetName(), klog.V(0)
		}
		log.InfoS("request denied", "user", user, "groups", groups, "verb", attrs.GetVerb(), "on", what, "reason", reason, "err", err)
	}
	return d, reason, err
}
