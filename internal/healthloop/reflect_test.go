package healthloop

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// leak is what a server that a tenant's kubeconfig points at puts into its answers:
// nothing the tenant can read (entries, the condition, Events) may show it.
const leak = "SECRET-of-the-server"

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
	f.pointClusterAt(testenv.NotKubernetes(t, leak).URL)
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
	f.pointClusterAt(testenv.NotHTTP(t, leak))
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
