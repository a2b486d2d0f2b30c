package syncapi

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParseReleasePath: any escaped URL path either is no endpoint (errNoRoute: 404), a
// malformed or invalid name (400), or a route whose names are valid and which
// ReleasePath builds back to a path that parses to the same route; and every valid
// namespace, name and subresource survive ReleasePath and parseReleasePath unchanged.
// The sync and health endpoints share this parser. Seeds are in testdata/fuzz; a short
// run (the package's TestMain starts a control plane, so set KUBEBUILDER_ASSETS):
//
//	go test -run '^$' -fuzz FuzzParseReleasePath -fuzztime 30s -parallel 1 ./internal/syncapi/
func FuzzParseReleasePath(f *testing.F) {
	for _, seed := range [][4]string{
		{PathPrefix + "/namespaces/demo/releases/web/sync", "demo", "web", "sync"},
		{PathPrefix + "/namespaces/demo/releases/web/health", "demo", "web.v1", "health"},
		{PathPrefix + "/namespaces/demo/releases/a%2Fb/sync", "a-b", "a.b.c", "sync"},
		{PathPrefix + "/namespaces/%zz/releases/web/sync", "x", strings.Repeat("a", 253), "health"},
		{PathPrefix + "/namespaces/demo/releases/web/sync/", "", "", "sync"},
		{PathPrefix + "/namespaces//releases//sync", "-a", "a..b", "status"},
		{"/apis/other/v1/namespaces/demo/releases/web/sync", "d", "%2e", "sync"},
		{PathPrefix + "/namespaces/demo/releases/%C3%A9/health", "é", "é", "health"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, escaped, ns, name, sub string) {
		route, err := parseReleasePath(escaped)
		if err == nil {
			if len(validation.IsDNS1123Label(route.namespace)) > 0 || len(validation.IsDNS1123Subdomain(route.name)) > 0 {
				t.Fatalf("%q parsed to invalid names %+v", escaped, route)
			}
			if route.subresource != SubresourceSync && route.subresource != SubresourceHealth {
				t.Fatalf("%q parsed to subresource %q", escaped, route.subresource)
			}
			again, err := parseReleasePath(ReleasePath(route.namespace, route.name, route.subresource))
			if err != nil || again != route {
				t.Fatalf("%q: %+v does not round-trip: %+v, %v", escaped, route, again, err)
			}
		} else if !errors.Is(err, errNoRoute) && !strings.HasPrefix(escaped, PathPrefix+"/namespaces/") {
			t.Fatalf("%q is not under %s/namespaces/ but is a 400: %v", escaped, PathPrefix, err)
		}
		valid := len(validation.IsDNS1123Label(ns)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0 &&
			(sub == SubresourceSync || sub == SubresourceHealth)
		got, err := parseReleasePath(ReleasePath(ns, name, sub))
		want := releaseRoute{namespace: ns, name: name, subresource: sub}
		if valid && (err != nil || got != want) {
			t.Fatalf("ReleasePath(%q, %q, %q) parses to %+v, %v", ns, name, sub, got, err)
		}
		if !valid && err == nil {
			t.Fatalf("ReleasePath(%q, %q, %q) is accepted as %+v", ns, name, sub, got)
		}
	})
}
