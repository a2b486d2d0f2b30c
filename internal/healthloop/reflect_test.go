package healthloop

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// leak is what a server that a tenant's kubeconfig points at puts into its answers:
// nothing the tenant can read (entries, the condition, Events) may show it.
const leak = "SECRET-of-the-server"

// answeringServer is a server that is not a Kubernetes API server, as a tenant's
// kubeconfig may name one (any address the observer's pod can reach): each ConfigMap
// name gets a different kind of answer.
func answeringServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		switch name {
		case "version":
			_, _ = w.Write([]byte(`{"major":"1","minor":"37"}`))
		case "ok":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok","namespace":%q},"data":{"ready":"true"}}`,
				strings.Split(r.URL.Path, "/")[4])
		case "body500":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("<html>" + leak + "</html>"))
		case "status403":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":403,"reason":"Forbidden","message":%q}`, leak)
		case "body503":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(leak))
		case "garbage200":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{%q:1}`, leak)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// bannerServer is a TCP server that is not HTTP at all: it greets with a banner.
func bannerServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("SSH-2.0-" + leak + "\r\n"))
			_ = c.Close()
		}
	}()
	return "http://" + l.Addr().String()
}

// pointClusterAt makes f's Cluster read server through a kubeconfig Secret.
func (f *fixture) pointClusterAt(server string) {
	f.t.Helper()
	f.secret("kubeconfig", map[string][]byte{"value": []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server))})
	cl := &v1alpha1.Cluster{}
	must(f.t, env.Client.Get(f.ctx, clientKey(f.ns, "target"), cl))
	if cl.Spec.KubeconfigSecretRef == nil {
		cl.Spec.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: "kubeconfig"}
		must(f.t, env.Client.Update(f.ctx, cl))
	}
}

// TestTargetAnswersAreNotReflected: what the server behind a tenant's kubeconfig
// answers reaches the tenant only as an HTTP code and a Kubernetes reason, or a fixed
// class of failure: in the entries' messages, the Healthy condition and the Events on
// the Release and the Cluster (docs/design.md, "Messages"). A Release of a cluster that
// answers nothing that is HTTP says that it is not connected, without the answer.
func TestTargetAnswersAreNotReflected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.readyRelease(0, 0)
	f.pointClusterAt(answeringServer(t).URL)
	f.inventory(cm("ok", 0, ""), cm("body500", 0, ""), cm("status403", 0, ""), cm("body503", 0, ""), cm("garbage200", 0, ""))
	f.pass()
	want := map[string]string{
		"ok":         "",
		"body500":    "cannot read object: 500 InternalError",
		"status403":  "cannot read object: 403 Forbidden",
		"body503":    "cannot read object: 503 ServiceUnavailable",
		"garbage200": "cannot read object: undecodable answer",
	}
	for name, msg := range want {
		if e := f.entry(name); e.Message != msg {
			t.Errorf("entry %s: message %q, want %q", name, e.Message, msg)
		}
	}
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if strings.Contains(c.Message, leak) {
		t.Errorf("condition message shows the server's answer: %q", c.Message)
	}
	eventually(t, "the Unknown Event", func() bool { return len(f.events("Release", f.rel)) > 0 })

	// The same Cluster, now naming a server that does not speak HTTP.
	f.pointClusterAt(bannerServer(t))
	f.pass()
	c = f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if !strings.HasPrefix(c.Message, assessFailedPrefix+detailClusterUnreachable) || strings.Contains(c.Message, leak) {
		t.Errorf("condition message %q: want a cluster not connected, without the server's answer", c.Message)
	}
	eventually(t, "the ClusterUnreachable Event", func() bool { return len(f.events("Cluster", "target")) > 0 })
	for _, kind := range []string{"Release", "Cluster"} {
		name := f.rel
		if kind == "Cluster" {
			name = "target"
		}
		for _, e := range f.events(kind, name) {
			if strings.Contains(e, leak) {
				t.Errorf("Event on the %s shows the server's answer: %q", kind, e)
			}
		}
	}
}
