package clustercache

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestForbiddenSecretWatchFallsBackToGets (issue #12): an identity that may get Secrets
// but not list or watch them reads the kubeconfig Secret with GETs, and says so once in
// the log and in convoy_observer_secret_watch_fallbacks_total; later passes neither
// retry the refused watch nor count it again until FallbackRetry passes.
func TestForbiddenSecretWatchFallsBackToGets(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	configMap(t, ns, "a", "1")
	kc, err := env.UserKubeconfig("target-"+ns, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kc"}, Data: map[string][]byte{"value": kc}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cfg := getOnlyConfig(t, ns, "secrets")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	getter, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(_, args string) { mu.Lock(); lines = append(lines, args); mu.Unlock() }, funcr.Options{})
	cache := New(Options{Secrets: cs, SecretReader: getter, Watch: true, Log: log})
	cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remote"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "kc"}}}
	reader, err := cache.GetReader(ctx, cluster)
	if err != nil {
		t.Fatalf("a Secret that may not be watched: %v; want it read with a GET", err)
	}
	if _, err := reader.Get(ctx, gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}
	fallbacks := secretWatchFallbacks.WithLabelValues(ns + "/kc")
	eventually(t, "the fallback to GETs", func() bool {
		return testutil.ToFloat64(fallbacks) == 1 && len(cache.secrets.watched()) == 0
	})
	logged := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "cannot watch the kubeconfig Secret; reading it with GETs") && strings.Contains(l, ns+"/kc") {
				n++
			}
		}
		return n
	}
	if n := logged(); n != 1 {
		t.Fatalf("fallback log lines = %d, want 1: %q", n, lines)
	}
	for i := 0; i < 3; i++ { // later passes read the Secret again
		if _, err := cache.GetReader(ctx, cluster); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(fallbacks); got != 1 || logged() != 1 {
		t.Fatalf("after more reads: fallbacks = %v, log lines = %d; want 1 and 1", got, logged())
	}
	// The series goes with the last Cluster that references the Secret.
	cache.Forget(ns, "remote")
	if got := series(secretWatchFallbacks, "secret", ns+"/kc"); len(got) != 0 {
		t.Fatalf("after Forget, the Secret's fallback series stays: %v", got)
	}
}
