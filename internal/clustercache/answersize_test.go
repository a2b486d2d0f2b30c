package clustercache

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestAnswerSizeIsBounded: a target's answer to a GET is read up to MaxAnswerBytes; a
// server that answers more (one tenant's server could make every read of its entries
// hundreds of MiB) fails the read with ErrAnswerTooLarge, described as such, instead of
// being read whole into the observer's memory. An object a little under the bound is read.
func TestAnswerSizeIsBounded(t *testing.T) {
	t.Parallel()
	chunk := strings.Repeat("A", 1<<20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mib := MaxAnswerBytes>>20 + 1 // the name "big": one MiB over the bound
		if strings.HasSuffix(r.URL.Path, "/fits") {
			mib = MaxAnswerBytes>>20 - 1
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"team-a"},"data":{"v":"`)
		for range mib {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
		fmt.Fprint(w, `"}}`)
	}))
	t.Cleanup(srv.Close)
	cache, cluster := kubeconfigCluster(t, srv, Options{})
	reader, err := cache.GetReader(context.Background(), cluster)
	must(t, err)
	obj, err := reader.Get(context.Background(), gvrConfigMaps, "team-a", "fits")
	if err != nil || len(obj.Object["data"].(map[string]any)["v"].(string)) != (MaxAnswerBytes>>20-1)<<20 {
		t.Fatalf("an answer under the bound: %v", err)
	}
	_, err = reader.Get(context.Background(), gvrConfigMaps, "team-a", "big")
	if !errors.Is(err, ErrAnswerTooLarge) || DescribeError(err) != "the answer is larger than 16 MiB" {
		t.Fatalf("an answer over the bound: %v (described %q); want ErrAnswerTooLarge", err, DescribeError(err))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEndlessFirstListIsBounded: a tenant's server answers an informer's first list by
// streaming objects and never ending it, in a list's answer or, for a client that asks
// for it, in a watch with initial events. The informer is stopped once the longest wait
// of a read for it (syncWaitLimit SyncWaits) has passed, and its type is read with GETs:
// the server is not read, nor its objects held, for as long as it streams.
func TestEndlessFirstListIsBounded(t *testing.T) {
	t.Parallel()
	var streaming atomic.Bool
	stopped := make(chan struct{})
	payload := strings.Repeat("B", 1<<10) // slow: far from MaxWatchBytes within the test
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		watching := r.URL.Query().Get("watch") == "true"
		list := watching || strings.HasSuffix(r.URL.Path, "/configmaps")
		if !list || !streaming.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"details":{"name":"x"}}`)
			return
		}
		defer close(stopped)
		if !watching {
			fmt.Fprint(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`)
		}
		for i := 0; ; i++ {
			item := fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x%d","namespace":"team-a","resourceVersion":"%d"},"data":{"v":"%s"}}`, i, i+1, payload)
			switch {
			case watching:
				item = `{"type":"ADDED","object":` + item + "}\n"
			case i > 0:
				item = "," + item
			}
			if _, err := fmt.Fprint(w, item); err != nil {
				return // the observer hung up
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	cache, cluster := kubeconfigCluster(t, srv, Options{Watch: true, SyncWait: 50 * time.Millisecond})
	t.Cleanup(cache.Stop)
	cache.Track("team-a/rel", cluster, []TargetRef{{GVR: gvrConfigMaps, Kind: "ConfigMap", Namespace: "team-a", Name: "x"}})
	if _, err := cache.GetReader(context.Background(), cluster); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("the observer still reads the endless first list after a minute")
	}
}

// kubeconfigCluster returns a cache with opts and a Cluster of namespace team-a whose
// kubeconfig Secret names the TLS server srv.
func kubeconfigCluster(t *testing.T, srv *httptest.Server, opts Options) (*Cache, *v1alpha1.Cluster) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	data, err := clientcmd.Write(*kc)
	must(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "kc"}, Data: map[string][]byte{"value": data}}
	opts.SecretReader = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(secret).Build()
	return New(opts), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mine"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "kc"}}}
}
