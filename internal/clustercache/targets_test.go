package clustercache

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	env = testenv.MustStart()
	code := m.Run()
	env.Stop()
	os.Exit(code)
}

var gvrConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

var nsCounter atomic.Int32

// namespace creates a fresh namespace.
func namespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("b%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// configMap creates or updates the ConfigMap ns/name with data.v = value.
func configMap(t *testing.T, ns, name, value string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{lastAppliedAnnotation: `{"big":"copy"}`, "keep": "me"}},
		Data: map[string]string{"v": value}}
	err := env.Client.Create(context.Background(), cm)
	if apierrors.IsAlreadyExists(err) {
		cur := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), clientKey(ns, name), cur); err != nil {
			t.Fatal(err)
		}
		cur.Data = cm.Data
		err = env.Client.Update(context.Background(), cur)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func cmRef(ns, name string) TargetRef {
	return TargetRef{GVR: gvrConfigMaps, Kind: "ConfigMap", Namespace: ns, Name: name}
}

// requestLog counts the requests of a client by verb (get, list, watch).
type requestLog struct {
	mu sync.Mutex
	n  map[string]int
	// holdLists delays every list and watch of ConfigMaps while it is set (an informer
	// that cannot sync).
	holdLists atomic.Bool
}

func (l *requestLog) count(verb string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[verb]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wrap counts and, when asked, stalls requests to the API server.
func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	l.n = map[string]int{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			verb := "get"
			switch {
			case r.URL.Query().Get("watch") == "true":
				verb = "watch"
			case strings.HasSuffix(r.URL.Path, "/configmaps") || strings.HasSuffix(r.URL.Path, "/secrets"):
				verb = "list"
			}
			l.mu.Lock()
			l.n[verb]++
			l.mu.Unlock()
			// Hold the informer's first list, a LIST or a streaming watch-list.
			if verb != "get" && strings.HasSuffix(r.URL.Path, "/configmaps") {
				for l.holdLists.Load() && r.Context().Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

func localCluster(name string) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestWatchFollowsTrackedTypes: a type that a Release starts to record starts an
// informer (per namespace, all namespaces above the threshold), reads come from it with
// no GET, managedFields and the last-applied annotation are not cached, a change calls
// the object callback, and the informer stops when nothing names the type any more.
func TestWatchFollowsTrackedTypes(t *testing.T) {
	ns1, ns2, ns3 := namespace(t), namespace(t), namespace(t)
	configMap(t, ns1, "a", "1")
	configMap(t, ns2, "b", "1")
	configMap(t, ns3, "c", "1")
	log := &requestLog{}
	var events sync.Map
	cache := NewClusterCache(ClusterCacheOptions{Local: log.wrap(env.Config), Watch: true, NamespaceThreshold: 2})
	cache.Notify(func(ev ObjectEvent) { events.Store(ev.Namespace+"/"+ev.Name, ev) }, nil)
	cluster := localCluster("watch")
	key := toolscache.MetaObjectToName(cluster).String()
	reader, err := cache.ForCluster(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r1", cluster, []TargetRef{cmRef(ns1, "a")})
	cache.Track("ns/r2", cluster, []TargetRef{cmRef(ns2, "b")})
	want := []string{"configmaps in " + ns1, "configmaps in " + ns2}
	slices.Sort(want)
	if got := cache.Scopes(key); !slices.Equal(got, want) {
		t.Fatalf("scopes = %v, want %v", got, want)
	}
	obj, err := reader.Get(context.Background(), gvrConfigMaps, ns1, "a")
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetManagedFields() != nil || obj.GetAnnotations()[lastAppliedAnnotation] != "" || obj.GetAnnotations()["keep"] != "me" {
		t.Fatalf("cached object not stripped as expected: managedFields=%v annotations=%v", obj.GetManagedFields(), obj.GetAnnotations())
	}
	gets := log.count("get")
	for i := 0; i < 5; i++ {
		if _, err := reader.Get(context.Background(), gvrConfigMaps, ns2, "b"); err != nil {
			t.Fatal(err)
		}
	}
	if d := log.count("get") - gets; d != 0 {
		t.Fatalf("%d GETs for reads of a watched, synced type; want 0", d)
	}

	configMap(t, ns1, "a", "2")
	eventually(t, "the update event of "+ns1+"/a", func() bool { _, ok := events.Load(ns1 + "/a"); return ok })
	eventually(t, "the cache to see the update", func() bool {
		o, err := reader.Get(context.Background(), gvrConfigMaps, ns1, "a")
		return err == nil && o.Object["data"].(map[string]any)["v"] == "2"
	})

	// A third namespace crosses the threshold: one informer for all namespaces.
	cache.Track("ns/r3", cluster, []TargetRef{cmRef(ns3, "c")})
	if got, want := cache.Scopes(key), []string{"configmaps (all namespaces)"}; !slices.Equal(got, want) {
		t.Fatalf("scopes above the threshold = %v, want %v", got, want)
	}
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns3, "c"); err != nil {
		t.Fatal(err)
	}

	for _, r := range []string{"ns/r1", "ns/r2", "ns/r3"} {
		cache.Track(r, cluster, nil)
	}
	if got := cache.Scopes(key); len(got) != 0 {
		t.Fatalf("scopes after every Release dropped the type = %v, want none", got)
	}
	// Unwatched now: a GET answers.
	gets = log.count("get")
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns1, "a"); err != nil {
		t.Fatal(err)
	}
	if log.count("get") != gets+1 {
		t.Fatal("a read of an unwatched type did not GET")
	}
}

// getOnlyConfig returns the config of a new user who may get resource (core group) in
// every namespace, and nothing else.
func getOnlyConfig(t *testing.T, ns, resource string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "get-only-" + resource + "-" + ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: role.Name}}}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	kc, err := env.UserKubeconfig(role.Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestForbiddenTypeFallsBackToGets: an identity that may get ConfigMaps but not list or
// watch them reads them with GETs (with the fallback metric), not as Unknown.
func TestForbiddenTypeFallsBackToGets(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	ctx := context.Background()
	cfg := getOnlyConfig(t, ns, "configmaps")
	cache := NewClusterCache(ClusterCacheOptions{Local: cfg, Watch: true})
	cluster := localCluster("forbidden-" + ns)
	reader, err := cache.ForCluster(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a")})
	obj, err := reader.Get(ctx, gvrConfigMaps, ns, "a")
	if err != nil || obj.GetName() != "a" {
		t.Fatalf("read of a type that may not be listed: %v, %v; want the object from a GET", obj, err)
	}
	fallbacks := watchFallbacks.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), "configmaps")
	eventually(t, "the fallback to GETs", func() bool {
		return testutil.ToFloat64(fallbacks) == 1 && len(cache.Scopes(toolscache.MetaObjectToName(cluster).String())) == 0
	})
	before := testutil.ToFloat64(targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceFallback))
	if _, err := reader.Get(ctx, gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceFallback)); got != before+1 {
		t.Fatalf("fallback reads = %v, want %v", got, before+1)
	}
	if _, err := reader.Get(ctx, gvrConfigMaps, ns, "missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("a missing object through the fallback: %v, want NotFound", err)
	}
}

// TestUnsyncedCacheNeverAnswersNotFound: while an informer's first list has not
// returned, reads go to the server (after SyncWait) and find the object.
func TestUnsyncedCacheNeverAnswersNotFound(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	log := &requestLog{}
	log.holdLists.Store(true)
	cache := NewClusterCache(ClusterCacheOptions{Local: log.wrap(env.Config), Watch: true, SyncWait: 200 * time.Millisecond})
	cluster := localCluster("unsynced")
	reader, err := cache.ForCluster(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a")})
	notSynced := targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceNotSynced)
	obj, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a")
	if err != nil || obj.GetName() != "a" {
		t.Fatalf("read while the cache has not synced: %v, %v; want the object", obj, err)
	}
	// It waited for the sync and then asked the server; it did not look in the empty
	// cache first (a miss there is also confirmed with a GET, see the next test).
	if log.count("get") == 0 || testutil.ToFloat64(notSynced) != 1 {
		t.Fatalf("GETs = %d, not-synced reads = %v; want a GET because the cache had not synced", log.count("get"), testutil.ToFloat64(notSynced))
	}
	log.holdLists.Store(false)
	eventually(t, "the cache to sync and answer without a GET", func() bool {
		gets := log.count("get")
		_, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a")
		return err == nil && log.count("get") == gets
	})
}

// TestMissInSyncedCacheIsConfirmed: an object created after the informer synced and
// read before its watch event arrives (the inventory can record it first) is found with
// a GET, not reported missing; a really missing object is NotFound.
func TestMissInSyncedCacheIsConfirmed(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	cache := NewClusterCache(ClusterCacheOptions{Local: env.Config, Watch: true})
	cluster := localCluster("miss")
	reader, err := cache.ForCluster(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a"), cmRef(ns, "late")})
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}
	misses := targetReads.WithLabelValues(toolscache.MetaObjectToName(cluster).String(), sourceMiss)
	if _, err := reader.Get(context.Background(), gvrConfigMaps, ns, "late"); !apierrors.IsNotFound(err) {
		t.Fatalf("missing object: %v, want NotFound", err)
	}
	if testutil.ToFloat64(misses) != 1 {
		t.Fatalf("miss reads = %v, want 1", testutil.ToFloat64(misses))
	}
}

// TestKubeconfigSecretRotation: the kubeconfig Secret is watched, not read with GETs
// (no SecretReader at all); replacing it rebuilds the cluster's clients and informers
// and calls the cluster callback; a deleted Secret makes the cluster not connected.
func TestKubeconfigSecretRotation(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	configMap(t, ns, "a", "1")
	kc1, err := env.UserKubeconfig("rot1-"+ns, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	kc2, err := env.UserKubeconfig("rot2-"+ns, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kc"}, Data: map[string][]byte{"value": kc1}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var woken sync.Map
	cache := NewClusterCache(ClusterCacheOptions{Secrets: cs, Watch: true})
	cache.Notify(nil, func(namespace, name string) { woken.Store(namespace+"/"+name, true) })
	cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remote"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "kc"}}}
	r1, err := cache.ForCluster(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	cache.Track(ns+"/app", cluster, []TargetRef{cmRef(ns, "a")})
	if _, err := r1.Get(ctx, gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}
	if again, err := cache.ForCluster(ctx, cluster); err != nil || again != r1 {
		t.Fatalf("a second pass rebuilt the clients of an unchanged Cluster (%v)", err)
	}
	if got := cache.secrets.watched(); !slices.Equal(got, []string{ns + "/kc"}) {
		t.Fatalf("watched Secrets = %v", got)
	}

	secret.Data = map[string][]byte{"value": kc2}
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rotation to wake the Cluster's Releases", func() bool { _, ok := woken.Load(ns + "/remote"); return ok })
	r2, err := cache.ForCluster(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if r2 == r1 {
		t.Fatal("the rotated Secret did not rebuild the cluster's reader")
	}
	if got := cache.Scopes(toolscache.MetaObjectToName(cluster).String()); !slices.Equal(got, []string{"configmaps in " + ns}) {
		t.Fatalf("scopes after the rebuild = %v: the Releases' interest was not carried over", got)
	}
	if _, err := r2.Get(ctx, gvrConfigMaps, ns, "a"); err != nil {
		t.Fatal(err)
	}

	woken.Delete(ns + "/remote")
	if err := env.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion to wake the Cluster's Releases", func() bool { _, ok := woken.Load(ns + "/remote"); return ok })
	if _, err := cache.ForCluster(ctx, cluster); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("Cluster whose Secret is gone: %v, want a not-found ErrClusterNotConnected", err)
	}
	cache.Forget(ns, "remote")
	if got := cache.secrets.watched(); len(got) != 0 {
		t.Fatalf("Secrets still watched after the Cluster was forgotten: %v", got)
	}
}

// TestStripForCache: managedFields and the last-applied annotation go; the rest stays.
func TestStripForCache(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
		"name": "x", "managedFields": []any{map[string]any{"manager": "m"}},
		"annotations": map[string]any{lastAppliedAnnotation: "{}"},
	}, "status": map[string]any{"ready": true}}}
	out, err := stripForCache(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if got.GetManagedFields() != nil || got.GetAnnotations() != nil || got.Object["status"] == nil {
		t.Fatalf("stripped = %v", got.Object)
	}
}
