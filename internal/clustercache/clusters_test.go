package clustercache

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
)

// silentServer accepts TCP connections and never answers: a blackholed API server.
func silentServer(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int32{}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c) // hold it open, say nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), accepted
}

// TestDeadClusterFailsFast: after one read of a cluster that does not answer times
// out, reads fail at once (no new connection) until the hold-down passes.
func TestDeadClusterFailsFast(t *testing.T) {
	t.Parallel()
	addr, accepted := silentServer(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cache := New(Options{
		Local:   &rest.Config{Host: "http://" + addr},
		Timeout: 300 * time.Millisecond, HoldDown: time.Minute, Clock: clk,
	})
	cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dead"}}
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if _, err := reader.Get(context.Background(), gvr, "default", "a"); !errors.Is(err, ErrClusterNotConnected) {
		t.Fatalf("first read: %v, want ErrClusterNotConnected", err)
	}
	before := accepted.Load()
	for i := 0; i < 5; i++ {
		if _, err := reader.Get(context.Background(), gvr, "default", "a"); !errors.Is(err, ErrClusterNotConnected) {
			t.Fatalf("read %d during the hold-down: %v", i, err)
		}
	}
	if accepted.Load() != before {
		t.Fatal("reads during the hold-down still dialled the dead cluster")
	}
	clk.Step(time.Minute)
	if _, err := reader.Get(context.Background(), gvr, "default", "a"); !errors.Is(err, ErrClusterNotConnected) {
		t.Fatalf("read after the hold-down: %v", err)
	}
	if accepted.Load() == before {
		t.Fatal("the cluster was not tried again after the hold-down")
	}
}

// TestNoLocalConfig: a Cluster without a kubeconfigSecretRef and no local
// config is an ErrClusterNotConnected, with a message naming the Cluster.
func TestNoLocalConfig(t *testing.T) {
	t.Parallel()
	cache := New(Options{})
	_, err := cache.GetReader(context.Background(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}})
	if !errors.Is(err, ErrClusterNotConnected) {
		t.Fatalf("err = %v", err)
	}
}

// TestSlowObjectIsNotADeadCluster: a read that times out on one slow object, while the
// server answers /version, is that object's error; the cluster is not held down.
func TestSlowObjectIsNotADeadCluster(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/version":
			_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
		case strings.HasSuffix(r.URL.Path, "/configmaps/slow"):
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
			_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"}}`))
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	cache := New(Options{Local: &rest.Config{Host: srv.URL}, Timeout: 300 * time.Millisecond, HoldDown: time.Hour})
	reader, err := cache.GetReader(context.Background(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	_, err = reader.Get(context.Background(), gvr, "default", "slow")
	if err == nil || errors.Is(err, ErrClusterNotConnected) {
		t.Fatalf("slow object: err = %v, want an error of that object only", err)
	}
	if _, err := reader.Get(context.Background(), gvr, "default", "fine"); err != nil {
		t.Fatalf("the next object after a slow one: %v", err)
	}
}

// TestKubeconfigExecIsRefused: a Cluster's kubeconfig Secret that would run a command in
// the observer's pod is a cluster the observer cannot connect to, and says which flag
// would allow it; with the flag the same kubeconfig is used.
func TestKubeconfigExecIsRefused(t *testing.T) {
	t.Parallel()
	kc := []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, interactiveMode: Never}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	_, err := New(Options{}).restConfig(cluster, kc)
	if !errors.Is(err, ErrClusterNotConnected) || !strings.Contains(err.Error(), "--insecure-kubeconfig-exec") {
		t.Fatalf("err = %v, want not connected, naming --insecure-kubeconfig-exec", err)
	}
	allowed := New(Options{Kubeconfig: kubeconfig.Options{AllowExec: true}})
	if cfg, err := allowed.restConfig(cluster, kc); err != nil || cfg.ExecProvider == nil {
		t.Fatalf("with AllowExec: %v", err)
	}
}
