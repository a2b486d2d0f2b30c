package clustercache

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestReadIdentity: a local Cluster is read by impersonating a ServiceAccount of its
// namespace (its serviceAccountName, else the default), never with the config's own
// identity unless UnsafeReadAsObserver says so; a 403 names the identity and the grant.
func TestReadIdentity(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Impersonate-User"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"SECRET-of-the-server"}`))
	}))
	defer srv.Close()
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	named := localCluster("named")
	named.Spec.ServiceAccountName = "team-reader"
	remote := localCluster("remote")
	remote.Spec.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: "kc"}
	for _, tc := range []struct {
		name     string
		opts     Options
		cluster  *v1alpha1.Cluster
		identity string
	}{
		{"default", Options{}, localCluster("default"), "system:serviceaccount:ns:convoy-health-reader"},
		{"flag", Options{DefaultServiceAccount: "reader"}, localCluster("flag"), "system:serviceaccount:ns:reader"},
		{"named", Options{UnsafeReadAsObserver: true}, named, "system:serviceaccount:ns:team-reader"},
		{"unsafe", Options{UnsafeReadAsObserver: true}, localCluster("unsafe"), ""},
		{"kubeconfig", Options{}, remote, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Local = &rest.Config{Host: srv.URL}
			c := New(tc.opts)
			if got := c.ReadIdentity(tc.cluster); got != tc.identity {
				t.Fatalf("ReadIdentity = %q, want %q", got, tc.identity)
			}
			if tc.cluster.Spec.KubeconfigSecretRef != nil {
				return // no Secret here: the identity is the kubeconfig's own
			}
			mu.Lock()
			seen = nil
			mu.Unlock()
			reader, err := c.GetReader(context.Background(), tc.cluster)
			if err != nil {
				t.Fatal(err)
			}
			_, err = reader.Get(context.Background(), gvr, "app", "web")
			mu.Lock()
			got := append([]string(nil), seen...)
			mu.Unlock()
			if len(got) != 1 || got[0] != tc.identity {
				t.Fatalf("Impersonate-User of the read = %q, want [%q]", got, tc.identity)
			}
			var fe *ForbiddenError
			msg := DescribeError(err)
			if strings.Contains(msg, "SECRET") {
				t.Errorf("the message quotes the server: %q", msg)
			}
			if tc.identity == "" {
				if errors.As(err, &fe) || msg != "403 Forbidden" {
					t.Errorf("read as the config's own identity: %q, want 403 Forbidden", msg)
				}
				return
			}
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is no ForbiddenError", err)
			}
			sa := strings.TrimPrefix(tc.identity, "system:serviceaccount:ns:")
			want := "403 Forbidden: " + tc.identity + " may not get deployments.apps in namespace app; grant it: kubectl create rolebinding ns-" + sa +
				" --clusterrole=convoy-health-reader --serviceaccount=ns:" + sa + " -n app"
			if msg != want {
				t.Errorf("message = %q, want %q", msg, want)
			}
		})
	}
}

// TestForbiddenHintGrantsNoClusterWideRead: the message of a refused read says how to
// grant it. For a namespaced object it prints the RoleBinding of that namespace; for an
// entry with no namespace (a tenant's choice: secrets with no namespace reads every
// Secret) it prints no command at all, only what a platform should check.
func TestForbiddenHintGrantsNoClusterWideRead(t *testing.T) {
	t.Parallel()
	id := "system:serviceaccount:team-a:convoy-health-reader"
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	ns := (&ForbiddenError{Identity: id, GVR: secrets, Namespace: "team-b", Name: "x"}).Error()
	if !strings.Contains(ns, "kubectl create rolebinding team-a-convoy-health-reader --clusterrole=convoy-health-reader --serviceaccount=team-a:convoy-health-reader -n team-b") {
		t.Errorf("namespaced: %q; want the RoleBinding of namespace team-b", ns)
	}
	none := (&ForbiddenError{Identity: id, GVR: secrets, Name: "x"}).Error()
	if strings.Contains(none, "kubectl") || strings.Contains(none, "clusterrole") || !strings.Contains(none, "with no namespace") {
		t.Errorf("no namespace: %q; want no command, and the missing namespace named", none)
	}
}

// TestForbiddenListSaysList: a refused LIST (a diagnosis's Pods) names the verb list.
func TestForbiddenListSaysList(t *testing.T) {
	e := &ForbiddenError{Identity: "system:serviceaccount:team-a:convoy-health-reader", Verb: "list",
		GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "team-a"}
	if !strings.Contains(e.Error(), "convoy-health-reader may not list pods in namespace team-a; grant it:") {
		t.Errorf("got %q", e.Error())
	}
}
