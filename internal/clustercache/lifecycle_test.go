package clustercache

import (
	"bytes"
	"context"
	"errors"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// goroutinesOf counts the goroutines that carry the profiler label of g: the
// informers and Secret watches of one cache, with every goroutine they started, but
// for the read loops of HTTP connections: a connection dialed by an informer stays in
// client-go's shared transport for other clients (its label is an accident of who
// dialed first).
func goroutinesOf(t *testing.T, g *goroutines) int {
	t.Helper()
	want := `"clustercache":` + strconv.Quote(g.id)
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	n := 0
	_, profile, _ := strings.Cut(buf.String(), "\n") // after "goroutine profile: total N"
	for _, record := range strings.Split(profile, "\n\n") {
		head, _, _ := strings.Cut(record, " @ ")
		count, err := strconv.Atoi(head)
		if err != nil || !strings.Contains(record, "# labels: {") || !strings.Contains(record, want) {
			continue
		}
		if strings.Contains(record, "http2.(*ClientConn).readLoop") || strings.Contains(record, "net/http.(*persistConn)") {
			continue
		}
		n += count
	}
	return n
}

// TestManagerShutdownStopsTheCache: the cache is the manager's Runnable; while the
// manager runs, its informers and the watch of a kubeconfig Secret run, and once the
// manager has stopped not one of their goroutines is left and the cache hands out no
// more readers.
func TestManagerShutdownStopsTheCache(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	kc, err := env.UserKubeconfig("lifecycle-"+ns, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kc"},
		Data: map[string][]byte{"value": kc}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cache := New(Options{Local: env.Config, Secrets: cs, Watch: true})
	mgr, err := manager.New(env.Config, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(cache); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()

	remote := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remote"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "kc"}}}
	for _, cluster := range []*v1alpha1.Cluster{remote, localCluster("lifecycle-" + ns)} {
		reader, err := cache.GetReader(ctx, cluster)
		if err != nil {
			t.Fatal(err)
		}
		cache.Track(cluster.Name+"/app", cluster, []TargetRef{cmRef(ns, "a")})
		if _, err := reader.Get(ctx, gvrConfigMaps, ns, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if n := goroutinesOf(t, cache.running); n < 3 { // two informers and a Secret watch at least
		t.Fatalf("%d goroutines of the cache while the manager runs; want its informers", n)
	}

	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache's goroutines to end", func() bool {
		return goroutinesOf(t, cache.running) == 0
	})
	if _, err := cache.GetReader(context.Background(), remote); !errors.Is(err, ErrClusterNotConnected) {
		t.Fatalf("GetReader after shutdown: %v, want ErrClusterNotConnected", err)
	}
}
