package clustercache

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// contentTypes records the answer's Content-Type of every list and watch, by resource.
type contentTypes struct {
	mu sync.Mutex
	by map[string][]string
}

func (c *contentTypes) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	c.by = map[string][]string{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			parts := strings.Split(strings.TrimSuffix(r.URL.Path, "/"), "/")
			if err == nil && len(parts) > 0 {
				c.mu.Lock()
				c.by[parts[len(parts)-1]] = append(c.by[parts[len(parts)-1]], resp.Header.Get("Content-Type"))
				c.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg
}

// of returns the Content-Types of the answers about resource.
func (c *contentTypes) of(resource string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.by[resource]...)
}

// TestBuiltinTypesAreWatchedInProtobuf: the informers of built-in types (Deployments,
// ConfigMaps) list and watch in protobuf, those of custom resources in JSON, and either
// way a read from the cache is the object the API server has (without managedFields),
// after the first list and after a change. A target newer than this binary's types is
// watched in JSON (a protobuf object would lose the fields it does not know).
func TestBuiltinTypesAreWatchedInProtobuf(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "img:1"}}}}}}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	configMap(t, ns, "cm", "1")
	target := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "custom"}}
	if err := env.Client.Create(ctx, target); err != nil {
		t.Fatal(err)
	}
	gvrDeployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrClusters := v1alpha1.GroupVersion.WithResource("clusters")
	refs := []TargetRef{{GVR: gvrDeployments, Kind: "Deployment", Namespace: ns, Name: "web"}, cmRef(ns, "cm"),
		{GVR: gvrClusters, Kind: "Cluster", Namespace: ns, Name: "custom"}}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	live := func(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj, _ := stripForCache(u)
		return obj.(*unstructured.Unstructured)
	}

	for _, tc := range []struct {
		name, server string
		protobuf     bool
	}{
		{name: "same version", server: "", protobuf: true},
		{name: "newer server", server: "v1.99.0", protobuf: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			types := &contentTypes{}
			cache := New(Options{Local: types.wrap(env.Config), Watch: true})
			defer cache.Stop()
			cluster := localCluster("protobuf-" + strings.ReplaceAll(tc.name, " ", "-"))
			reader, err := cache.GetReader(ctx, cluster)
			if err != nil {
				t.Fatal(err)
			}
			if tc.server != "" {
				cache.mu.Lock()
				cache.clients[toolscache.MetaObjectToName(cluster).String()].watches.typed.version = func() (*version.Info, error) {
					return &version.Info{Major: "1", Minor: "99", GitVersion: tc.server}, nil
				}
				cache.mu.Unlock()
			}
			cache.SetRuleFields(nil)
			cache.Track("ns/r", cluster, refs)
			for _, ref := range refs {
				eventually(t, "the "+ref.GVR.Resource+" informer to sync", func() bool {
					s, _ := cache.clients[toolscache.MetaObjectToName(cluster).String()].watches.covering(ref.GVR, ns)
					return s != nil && s.informer.HasSynced()
				})
				// A first list that does not yet hold an object created a moment before
				// (a plain list from the watch cache) makes its read a GET, of a whole
				// object, until the watch brings it.
				var got, want *unstructured.Unstructured
				if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
					var err error
					if got, err = reader.Get(ctx, ref.GVR, ns, ref.Name); err != nil {
						return false, err
					}
					want = live(ref.GVR, ref.Name)
					return equality.Semantic.DeepEqual(got.Object, want.Object), nil
				}); err != nil {
					t.Fatalf("%s from the cache (%v):\n%v\nfrom the API server:\n%v", ref.GVR.Resource, err, got, want)
				}
			}
			for resource, builtin := range map[string]bool{"deployments": true, "configmaps": true, "clusters": false} {
				got := types.of(resource)
				if len(got) == 0 {
					t.Fatalf("no list or watch of %s", resource)
				}
				for _, ct := range got {
					if protobuf := strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf"); protobuf != (builtin && tc.protobuf) {
						t.Errorf("%s answered in %q", resource, ct)
					}
				}
			}
			// A change arrives through the watch, decoded alike.
			cur := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, clientKey(ns, "web"), cur); err != nil {
				t.Fatal(err)
			}
			cur.Labels["changed"] = tc.server + "x"
			if err := env.Client.Update(ctx, cur); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the change in the cache", func() bool {
				got, err := reader.Get(ctx, gvrDeployments, ns, "web")
				return err == nil && got.GetLabels()["changed"] == tc.server+"x" &&
					equality.Semantic.DeepEqual(got.Object, live(gvrDeployments, "web").Object)
			})
		})
	}
}

// TestProtobufServes: a target is watched in protobuf only when its version is known
// and not newer (major.minor) than the types of this binary.
func TestProtobufServes(t *testing.T) {
	built := utilversion.MustParseGeneric("1.37")
	for _, tc := range []struct {
		git  string
		want bool
	}{
		{"v1.37.2", true}, {"v1.30.0-gke.1", true}, {"v1.37.9+k3s1", true},
		{"v1.38.0", false}, {"v2.0.0", false}, {"", false}, {"not a version", false},
	} {
		if got := protobufServes(&version.Info{GitVersion: tc.git}, built); got != tc.want {
			t.Errorf("server %q: protobuf %v, want %v", tc.git, got, tc.want)
		}
	}
	if protobufServes(nil, built) || protobufServes(&version.Info{GitVersion: "v1.30.0"}, nil) {
		t.Error("protobuf without a version")
	}
	if builtVersion() == nil {
		t.Error("the version of this binary's types is unknown")
	}
}
