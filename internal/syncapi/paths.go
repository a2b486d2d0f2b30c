package syncapi

import "net/url"

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
