package clustercache

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kumodo/convoy-observer/internal/kubeconfig"
)

// TestRedirectsAreNotFollowed: the tenant's kubeconfig names a server that is on
// --target-server-allowlist and is https (both checked by internal/kubeconfig), and that
// server answers every request with a 302 to a plain-http server off the allow-list (in a
// pod: the node's metadata service, a kubelet's read-only port, any in-cluster http
// service). client-go's HTTP client would follow it, sending the kubeconfig's token and
// the read identity's Impersonate-User header there and handing its answer to the rules
// as the object. The cache's clients follow no redirect: nothing reaches the other
// server, and the read fails with the 302's code.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var internalHits []string
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		internalHits = append(internalHits, r.Method+" "+r.URL.String()+" auth="+r.Header.Get("Authorization")+" as="+r.Header.Get("Impersonate-User"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"web","namespace":"team-a"},"data":{"leak":"bytes-of-a-server-the-operator-did-not-allow"}}`))
	}))
	defer internal.Close()
	iu, _ := url.Parse(internal.URL)
	internalURL := "http://localhost:" + iu.Port() + "/latest/meta-data"

	allowed := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internalURL, http.StatusFound)
	}))
	defer allowed.Close()
	au, _ := url.Parse(allowed.URL)
	opts := kubeconfig.Options{AllowedServers: []string{au.Host}} // "127.0.0.1:<port>" only

	// Control: naming the internal server directly is refused (not https, not allowed).
	direct := clientcmdapi.NewConfig()
	direct.Clusters["c"] = &clientcmdapi.Cluster{Server: internalURL}
	direct.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "tenant-a-token"}
	direct.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	direct.CurrentContext = "c"
	data, err := clientcmd.Write(*direct)
	must(t, err)
	if _, err := kubeconfig.RESTConfig(data, opts); err == nil {
		t.Fatal("control: a kubeconfig naming the internal http server directly was accepted")
	}

	cache, cluster := kubeconfigCluster(t, allowed, Options{Kubeconfig: opts})
	cluster.Spec.ServiceAccountName = "reader"
	r, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatalf("the allowed https kubeconfig was refused: %v", err)
	}
	obj, err := r.Get(context.Background(), gvrConfigMaps, "team-a", "web")
	mu.Lock()
	defer mu.Unlock()
	t.Logf("requests that reached the non-allowed http server: %q", internalHits)
	if err != nil {
		t.Logf("read error: %v", err)
	}
	if len(internalHits) > 0 {
		leak := ""
		if obj != nil {
			leak = obj.Object["data"].(map[string]any)["leak"].(string)
		}
		t.Errorf("a redirect from the allowed server made the observer talk to %s (not https, not on the allow-list); "+
			"it sent %q and the answer became the object (data.leak=%q)", internalURL, strings.Join(internalHits, "; "), leak)
	}
	if got := DescribeError(err); !strings.HasPrefix(got, "302") {
		t.Errorf("the redirected read: %v, described %q; want a failed read with the 302's code", err, got)
	}
}
