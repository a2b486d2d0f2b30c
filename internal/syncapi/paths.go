package syncapi

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Group and Version are the API group and version under which convoy-api serves the
// Release subresources, as an APIService would register them.
const (
	Group   = "subresources.convoy.kumodo.io"
	Version = "v1alpha1"
)

// Subresource names: the last path segment of an endpoint.
const (
	SubresourceSync   = "sync"
	SubresourceHealth = "health"
)

// PathPrefix is the group-version path of the endpoints; GET on it answers the
// discovery document (an APIResourceList).
const PathPrefix = "/apis/" + Group + "/" + Version

// HealthzPath answers 200 "ok" for liveness and readiness probes.
const HealthzPath = "/healthz"

// ReleasePath returns the path of a subresource of the Release namespace/name, with
// both names path-escaped:
// /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/{subresource}.
func ReleasePath(namespace, name, subresource string) string {
	return PathPrefix + "/namespaces/" + url.PathEscape(namespace) + "/releases/" + url.PathEscape(name) + "/" + subresource
}

// SyncPath returns the path of the /sync endpoint of the Release namespace/name.
func SyncPath(namespace, name string) string {
	return ReleasePath(namespace, name, SubresourceSync)
}

// HealthPath returns the path of the /health endpoint of the Release namespace/name.
func HealthPath(namespace, name string) string {
	return ReleasePath(namespace, name, SubresourceHealth)
}

// errNoRoute means that a path is not one of the endpoints (404); any other error of
// parseReleasePath means that it is one, with names that cannot be valid (400).
var errNoRoute = errors.New("no such endpoint")

// releaseRoute is a parsed release subresource path.
type releaseRoute struct {
	namespace, name, subresource string
}

// parseReleasePath splits an escaped URL path of the form
// PathPrefix/namespaces/{ns}/releases/{name}/{subresource}. The shape and the
// subresource decide whether the path is an endpoint at all (else errNoRoute); the names
// must then unescape to a DNS-1123 label (namespace) and subdomain (name), as the API
// server would require, so that a bad name is a 400 rather than a confusing 404.
func parseReleasePath(escaped string) (releaseRoute, error) {
	rest, ok := strings.CutPrefix(escaped, PathPrefix+"/")
	if !ok {
		return releaseRoute{}, errNoRoute
	}
	seg := strings.Split(rest, "/")
	if len(seg) != 5 || seg[0] != "namespaces" || seg[2] != "releases" {
		return releaseRoute{}, errNoRoute
	}
	if seg[4] != SubresourceSync && seg[4] != SubresourceHealth {
		return releaseRoute{}, errNoRoute
	}
	ns, err := url.PathUnescape(seg[1])
	if err != nil {
		return releaseRoute{}, fmt.Errorf("malformed namespace %q: %w", seg[1], err)
	}
	name, err := url.PathUnescape(seg[3])
	if err != nil {
		return releaseRoute{}, fmt.Errorf("malformed name %q: %w", seg[3], err)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return releaseRoute{}, fmt.Errorf("invalid namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return releaseRoute{}, fmt.Errorf("invalid release name %q: %s", name, strings.Join(errs, "; "))
	}
	return releaseRoute{namespace: ns, name: name, subresource: seg[4]}, nil
}
