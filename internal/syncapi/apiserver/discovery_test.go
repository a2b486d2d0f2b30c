package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// TestDiscoveryAndOpenAPI: through the kube-apiserver, discovery lists the group with
// the subresources and their verbs and no error (what kubectl api-resources reads),
// kubectl's REST mapper still resolves "releases" to convoy.kumodo.io, and the OpenAPI
// documents describe the two syncapi.
func TestDiscoveryAndOpenAPI(t *testing.T) {
	t.Parallel()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	must(t, err)
	var list []string
	eventually(t, 30*time.Second, func() error {
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			return err
		}
		list = nil
		for _, l := range lists {
			if l.GroupVersion != "subresources.convoy.kumodo.io/v1alpha1" {
				continue
			}
			for _, r := range l.APIResources {
				list = append(list, r.Name+" "+r.Kind+" "+strings.Join(r.Verbs, ","))
			}
		}
		return nil
	})
	slices.Sort(list)
	want := []string{"releases Release ", "releases/health HealthResponse get", "releases/sync SyncResponse create"}
	if !slices.Equal(list, want) {
		t.Errorf("discovery of subresources.convoy.kumodo.io/v1alpha1 = %q, want %q", list, want)
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: "releases"})
	if err != nil || gvr.Group != "convoy.kumodo.io" {
		t.Errorf(`kubectl's mapper resolves "releases" to %v (%v), want convoy.kumodo.io`, gvr, err)
	}

	cs, err := kubernetes.NewForConfig(env.Config)
	must(t, err)
	v2, err := cs.RESTClient().Get().AbsPath("/openapi/v2").DoRaw(context.Background())
	must(t, err)
	var doc struct {
		Paths       map[string]any `json:"paths"`
		Definitions map[string]any `json:"definitions"`
	}
	must(t, json.Unmarshal(v2, &doc))
	for _, p := range []string{
		"/apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{namespace}/releases/{name}/sync",
		"/apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{namespace}/releases/{name}/health",
	} {
		if doc.Paths[p] == nil {
			t.Errorf("/openapi/v2 lacks %s", p)
		}
	}
	for _, d := range []string{"com.kumodo.convoy.subresources.v1alpha1.HealthResponse", "com.kumodo.convoy.subresources.v1alpha1.HealthEntry"} {
		if doc.Definitions[d] == nil {
			t.Errorf("/openapi/v2 lacks the definition %s", d)
		}
	}
	// The kube-apiserver's aggregator reads the group's OpenAPI v3 document on its own
	// schedule after the APIService turns available: it may 404 for a while.
	eventually(t, 30*time.Second, func() error {
		v3, err := cs.RESTClient().Get().AbsPath("/openapi/v3/apis/subresources.convoy.kumodo.io/v1alpha1").DoRaw(context.Background())
		if err != nil || !strings.Contains(string(v3), "HealthResponse") || !strings.Contains(string(v3), "decidedBy") {
			return fmt.Errorf("/openapi/v3 of the group: %v, %.200s", err, v3)
		}
		return nil
	})
}

// TestRequestLogNamesTheUser: convoy-api logs each request with the user that the
// kube-apiserver authenticated. Not parallel: it swaps the Handler's logger.
func TestRequestLogNamesTheUser(t *testing.T) {
	ns := tenant(t, "log")
	lines := make(chan string, 100)
	old := api.Endpoints.Log
	api.Endpoints.Log = funcr.New(func(_, args string) {
		select {
		case lines <- args:
		default:
		}
	}, funcr.Options{})
	t.Cleanup(func() { api.Endpoints.Log = old })
	if _, err := syncapiclient.NewClient(env.Config).Health(context.Background(), ns, "app"); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, `"release"="`+ns+`/app"`) {
				for _, want := range []string{`"user"="admin"`, `"status"=200`, `"subresource"="health"`} {
					if !strings.Contains(l, want) {
						t.Errorf("log line %s lacks %s", l, want)
					}
				}
				return
			}
		case <-deadline:
			t.Fatal("no request log line for the Release")
		}
	}
}

// TestServingCertReload: a renewed serving certificate is served without a restart, and
// the kube-apiserver, which verifies it against the APIService's caBundle, keeps
// reaching convoy-api.
func TestServingCertReload(t *testing.T) {
	t.Parallel()
	before := servedSerial(t)
	must(t, agg.RenewServingCert())
	eventually(t, 90*time.Second, func() error {
		if servedSerial(t) == before {
			return errorf("convoy-api still serves the certificate with serial %s", before)
		}
		return nil
	})
	ns := tenant(t, "reload")
	if _, err := syncapiclient.NewClient(env.Config).Health(context.Background(), ns, "app"); err != nil {
		t.Errorf("health through the kube-apiserver after the renewal: %v", err)
	}
}

// servedSerial returns the serial number of the certificate convoy-api serves.
func servedSerial(t *testing.T) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(agg.ServingCA)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(apiURL(), "https://"), &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	must(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}
