package clustercache

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	kubeversion "k8s.io/component-base/version"
)

// Built-in types are watched in protobuf (docs/design.md, "What the cache keeps"): the
// API server encodes, and the informer decodes, a Deployment in protobuf at a fraction
// of what JSON costs both, and the target informers' first lists are most of the loop's
// start. A protobuf object decodes into this binary's Go type, which has no place for a
// field it does not know, so a target whose Kubernetes version is newer than the types
// this binary was built with (or whose version is unknown) is watched in JSON, which
// keeps every field; so is every other type (custom resources, aggregated APIs), with
// the dynamic client. Either way the cache keeps the same content (compact).

// builtinKinds maps each resource of client-go's scheme (the Kubernetes API types this
// binary was built with) to its kind.
var builtinKinds = sync.OnceValue(func() map[schema.GroupVersionResource]schema.GroupVersionKind {
	m := map[schema.GroupVersionResource]schema.GroupVersionKind{}
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		obj, err := clientgoscheme.Scheme.New(gvk)
		if err != nil {
			continue
		}
		if _, err := meta.Accessor(obj); err != nil || meta.IsListType(obj) {
			continue // options, the events of a watch, lists: not a resource's objects
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		m[plural] = gvk
	}
	return m
})

// builtVersion is the Kubernetes version of the API types this binary was built with:
// component-base's, which is released with k8s.io/api (go.mod keeps the Kubernetes
// modules at one version).
var builtVersion = sync.OnceValue(func() *utilversion.Version {
	v, err := utilversion.ParseGeneric(kubeversion.DefaultKubeBinaryVersion)
	if err != nil {
		return nil
	}
	return v
})

// protobufServes reports whether a server of version info sends no field of a built-in
// type that the types of built do not have: it is not newer than built (major and minor).
func protobufServes(info *version.Info, built *utilversion.Version) bool {
	if info == nil || built == nil {
		return false
	}
	v, err := utilversion.ParseGeneric(info.GitVersion)
	if err != nil {
		return false
	}
	return !utilversion.MajorMinor(v.Major(), v.Minor()).GreaterThan(built)
}

// typedClients are the protobuf REST clients of a target cluster's built-in types, one
// per group version, over the cluster's watch HTTP client (its answer limit included).
type typedClients struct {
	cfg *rest.Config
	hc  *http.Client
	// version asks the cluster its version (discovery; the GET client's timeout).
	version func() (*version.Info, error)

	mu sync.Mutex
	// served: the version was read, and protobuf keeps every field (protobufServes).
	known, served bool
	byGV          map[schema.GroupVersion]rest.Interface
}

func newTypedClients(cfg *rest.Config, hc *http.Client, serverVersion func() (*version.Info, error)) *typedClients {
	return &typedClients{cfg: cfg, hc: hc, version: serverVersion, byGV: map[schema.GroupVersion]rest.Interface{}}
}

// kindOf returns the kind of gvr when it is a built-in type.
func (t *typedClients) kindOf(gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool) {
	if t == nil {
		return schema.GroupVersionKind{}, false
	}
	gvk, ok := builtinKinds()[gvr]
	return gvk, ok
}

// serves reports whether the cluster's built-in types can be watched in protobuf. The
// first answer of the cluster is kept; a failed question is asked again next time.
func (t *typedClients) serves() bool {
	t.mu.Lock()
	known, served := t.known, t.served
	t.mu.Unlock()
	if known {
		return served
	}
	info, err := t.version()
	if err != nil {
		return false
	}
	served = protobufServes(info, builtVersion())
	t.mu.Lock()
	t.known, t.served = true, served
	t.mu.Unlock()
	return served
}

// client returns the protobuf REST client of gv.
func (t *typedClients) client(gv schema.GroupVersion) (rest.Interface, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.byGV[gv]; c != nil {
		return c, nil
	}
	cfg := rest.CopyConfig(t.cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	c, err := rest.RESTClientForConfigAndClient(cfg, t.hc)
	if err != nil {
		return nil, fmt.Errorf("building the protobuf client of %s: %w", gv, err)
	}
	t.byGV[gv] = c
	return c, nil
}

// listWatchOf returns the list and watch of k's informer, its example object (nil:
// either typed or unstructured objects) and, for a built-in type, its kind (the typed
// objects that protobuf decodes carry none). A built-in type chooses protobuf or JSON at
// its first list or watch, in the informer's goroutine (asking the cluster its version
// may take the GET client's timeout), and keeps that choice for the informer's life.
func (w *targetWatches) listWatchOf(k scopeKey) (toolscache.ListWithContextFunc, toolscache.WatchFuncWithContext, runtime.Object, schema.GroupVersionKind) {
	ri := w.client.Resource(k.gvr).Namespace(k.namespace)
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ri.List(ctx, o) }
	watchFn := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return ri.Watch(ctx, o) }
	gvk, builtin := w.typed.kindOf(k.gvr)
	if !builtin {
		return list, watchFn, &unstructured.Unstructured{}, schema.GroupVersionKind{}
	}
	var once sync.Once
	choose := func() {
		once.Do(func() {
			if !w.typed.serves() {
				return
			}
			c, err := w.typed.client(gvk.GroupVersion())
			if err != nil {
				w.log.Info("watching in JSON", "scope", k.String(), "reason", err.Error())
				return
			}
			lw := toolscache.NewFilteredListWatchFromClient(c, k.gvr.Resource, k.namespace, func(*metav1.ListOptions) {})
			list, watchFn = lw.ListWithContextFunc, lw.WatchFuncWithContext
		})
	}
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			choose()
			return list(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			choose()
			return watchFn(ctx, o)
		}, nil, gvk
}
