package main

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1beta1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1"
)

// resourceMapper finds the resource (plural, lowercase) of an object's kind, as the
// loop gets it from the inventory: from --resource KIND=plural first, then the
// cluster's discovery (--kubeconfig), then the built-in kinds of client-go's scheme.
// A kind none of them knows is an error, or with --guess-resources a guess that the
// caller reports.
type resourceMapper struct {
	explicit map[string]string // "Kind" or "Kind.group" → resource
	mappers  meta.MultiRESTMapper
	guess    bool
}

// resourceMapping is the answer for one kind.
type resourceMapping struct {
	resource string
	guessed  bool
}

// newResourceMapper builds the mapper of health eval from its flags. specs are the
// --resource values (KIND=plural or KIND.GROUP=plural); fromCluster (a connection flag
// given) adds the discovery of conn's cluster.
func newResourceMapper(specs []string, conn *connection, fromCluster, guess bool) (*resourceMapper, error) {
	m := &resourceMapper{explicit: map[string]string{}, guess: guess}
	for _, s := range specs {
		kind, plural, ok := strings.Cut(s, "=")
		kind, plural = strings.TrimSpace(kind), strings.TrimSpace(plural)
		if !ok || kind == "" || plural == "" || plural != strings.ToLower(plural) || strings.ContainsAny(plural, "/. ") {
			return nil, usageError(fmt.Errorf("invalid --resource %q: want KIND=plural or KIND.GROUP=plural, the plural in lowercase (for example NetworkChaos=networkchaos)", s))
		}
		m.explicit[kind] = plural
	}
	if fromCluster {
		cfg, err := conn.restConfig()
		if err != nil {
			return nil, inputError(err)
		}
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return nil, inputError(fmt.Errorf("discovery client: %w", err))
		}
		cached := memory.NewMemCacheClient(dc)
		groups, err := restmapper.GetAPIGroupResources(cached)
		if err != nil {
			return nil, inputError(fmt.Errorf("discovering the cluster's resources: %w", err))
		}
		m.mappers = append(m.mappers, restmapper.NewDiscoveryRESTMapper(groups))
	}
	m.mappers = append(m.mappers, builtinMapper())
	return m, nil
}

// builtinKinds is every kind the API server serves by default: client-go's scheme (the
// core API groups) plus apiextensions.k8s.io (CustomResourceDefinition) and
// apiregistration.k8s.io (APIService), which the API server serves from its own
// extensions and aggregator.
var builtinKinds = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme,
		apiextensionsv1.AddToScheme, apiextensionsv1beta1.AddToScheme,
		apiregistrationv1.AddToScheme, apiregistrationv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // static registration: cannot fail
		}
	}
	return s
}()

// builtinMapper maps the kinds the API server serves by default (builtinKinds) to their
// resources. The scheme holds no plurals; built-in kinds all
// follow the API server's naming convention, which meta.UnsafeGuessKindToResource
// implements (TestBuiltinMapperMatchesTheAPIServer checks it against a real server's
// discovery).
func builtinMapper() meta.RESTMapper {
	var gvs []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for gvk := range builtinKinds.AllKnownTypes() {
		if !seen[gvk.GroupVersion()] && gvk.Version != "__internal" {
			seen[gvk.GroupVersion()] = true
			gvs = append(gvs, gvk.GroupVersion())
		}
	}
	m := meta.NewDefaultRESTMapper(gvs)
	for gvk := range builtinKinds.AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") ||
			gvk.Kind == "WatchEvent" || gvk.Kind == "Status" || gvk.Kind == "APIGroup" || gvk.Kind == "APIVersions" ||
			gvk.Kind == "APIResourceList" || gvk.Kind == "APIGroupList" {
			continue
		}
		m.Add(gvk, meta.RESTScopeNamespace) // the scope does not matter for the rules
	}
	return m
}

// resourceFor returns the resource of an object of the given apiVersion and kind.
func (m *resourceMapper) resourceFor(apiVersion, kind string) (resourceMapping, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return resourceMapping{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	if r, ok := m.explicit[kind+"."+gv.Group]; ok && gv.Group != "" {
		return resourceMapping{resource: r}, nil
	}
	if r, ok := m.explicit[kind]; ok {
		return resourceMapping{resource: r}, nil
	}
	if mapping, err := m.mappers.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version); err == nil {
		return resourceMapping{resource: mapping.Resource.Resource}, nil
	}
	if m.guess {
		return resourceMapping{resource: guessResource(kind), guessed: true}, nil
	}
	return resourceMapping{}, fmt.Errorf("no resource known for kind %s of %s: name it with --resource %s=PLURAL, "+
		"give --kubeconfig to ask the cluster, or --guess-resources to guess it", kind, apiVersion, kind)
}
