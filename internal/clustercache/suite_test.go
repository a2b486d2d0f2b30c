package clustercache

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

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

// requestLog counts the requests of a client by verb (get, list, watch, version), and
// the first lists by kind ("streamed list", "list from the watch cache").
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
			case r.URL.Path == "/version":
				verb = "version" // the probe of a server that did not answer (dynamicReader.answers)
			case strings.HasSuffix(r.URL.Path, "/configmaps") || strings.HasSuffix(r.URL.Path, "/secrets"):
				verb = "list"
			}
			l.mu.Lock()
			l.n[verb]++
			if verb == "watch" && r.URL.Query().Get("sendInitialEvents") == "true" {
				l.n["streamed list"]++ // a watch that streams the first list (client-go's WatchListClient)
			}
			if verb == "list" && r.URL.Query().Get("resourceVersion") == "0" {
				l.n["list from the watch cache"]++
			}
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
	return userConfig(t, role.Name)
}

// namespacedConfig returns the config of a user who may get, list and watch resource
// (core group) in namespaces only: RoleBindings there, nothing cluster-wide.
func namespacedConfig(t *testing.T, name, resource string, namespaces ...string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get", "list", "watch"}}}}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}}
		if err := env.Client.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
	}
	return userConfig(t, name)
}

// userConfig returns the config of the user name (a client certificate, no group).
func userConfig(t *testing.T, name string) *rest.Config {
	t.Helper()
	kc, err := env.UserKubeconfig(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
