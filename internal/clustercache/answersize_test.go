package clustercache

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	data, err := clientcmd.Write(*kc)
	must(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "kc"}, Data: map[string][]byte{"value": data}}
	cache := New(Options{SecretReader: fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(secret).Build()})
	reader, err := cache.GetReader(context.Background(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mine"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "kc"}}})
	must(t, err)
	obj, err := reader.Get(context.Background(), gvrConfigMaps, "team-a", "fits")
	if err != nil || len(obj.Object["data"].(map[string]any)["v"].(string)) != (MaxAnswerBytes>>20-1)<<20 {
		t.Fatalf("an answer under the bound: %v", err)
	}
	_, err = reader.Get(context.Background(), gvrConfigMaps, "team-a", "big")
	if !errors.Is(err, ErrAnswerTooLarge) || DescribeError(err) != ErrAnswerTooLarge.Error() {
		t.Fatalf("an answer over the bound: %v (described %q); want ErrAnswerTooLarge", err, DescribeError(err))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
