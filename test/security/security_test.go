package security

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// copyRule is a tenant's rule that copies every value of an object's data into the
// entry's message, which the tenant reads in its ReleaseInventory.
var copyRule = extv1alpha1.RuleSpec{
	APIVersion: "v1", Resources: []string{"configmaps", "secrets"},
	RuleExpression:    "false",
	MessageExpression: "'data: ' + object.data.map(k, object.data[k]).join(' ')",
}

// release makes the tenant's Release name of Cluster cluster (its rules: the tenant's
// HealthRuleSets), and, as the convoy controller, its inventory of entries and its
// status.lastAttempted.
func (tn *tenant) release(t *testing.T, name, cluster string, entries ...v1alpha1.InventoryEntry) {
	t.Helper()
	ctx := context.Background()
	must(t, tn.c.Create(ctx, &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tn.ns},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: cluster},
			HealthAssessment: &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{}, Deadline: &metav1.Duration{Duration: time.Hour}}},
	}))
	for i := range entries {
		entries[i].RenderRef = "r1"
	}
	must(t, env.Client.Create(ctx, &v1alpha1.ReleaseInventory{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tn.ns},
		Entries: entries}))
	must(t, env.Client.Status().Apply(ctx, acv1alpha1.Release(name, tn.ns).WithStatus(acv1alpha1.ReleaseStatus().
		WithLastAttempted(acv1alpha1.AttemptStatus().WithRenderRef("r1"))), client.FieldOwner(controllerManager), client.ForceOwnership))
}

func entryOf(group, version, resource, kind, ns, name string) v1alpha1.InventoryEntry {
	return v1alpha1.InventoryEntry{Group: group, Version: version, Resource: resource, Kind: kind, Namespace: ns, Name: name}
}

// assessed waits until every entry of the tenant's Release name has a state and its
// Healthy condition is set, and returns both.
func (tn *tenant) assessed(t *testing.T, name string) (*v1alpha1.ReleaseInventory, *metav1.Condition) {
	t.Helper()
	key := types.NamespacedName{Namespace: tn.ns, Name: name}
	deadline := time.Now().Add(60 * time.Second)
	for {
		rel, inv := &v1alpha1.Release{}, &v1alpha1.ReleaseInventory{}
		if tn.c.Get(context.Background(), key, rel) == nil && tn.c.Get(context.Background(), key, inv) == nil {
			done := len(inv.Entries) > 0
			for _, e := range inv.Entries {
				done = done && e.State != ""
			}
			c := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy)
			if done && c != nil && c.ObservedGeneration == rel.Generation {
				return inv, c
			}
			if time.Now().After(deadline) {
				t.Fatalf("Release %s/%s not assessed in 60s: condition %+v, entries %+v", tn.ns, name, c, inv.Entries)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("Release %s/%s or its inventory not readable by the tenant", tn.ns, name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// conditionOf waits until the Healthy condition of the tenant's Release name satisfies
// ok, and returns it.
func (tn *tenant) conditionOf(t *testing.T, name string, ok func(*metav1.Condition) bool) *metav1.Condition {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last *metav1.Condition
	for time.Now().Before(deadline) {
		rel := &v1alpha1.Release{}
		if tn.c.Get(context.Background(), types.NamespacedName{Namespace: tn.ns, Name: name}, rel) == nil {
			if last = meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy); last != nil && ok(last) {
				return last
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("Release %s/%s: the Healthy condition is %+v after 60s", tn.ns, name, last)
	return nil
}

// everythingTheTenantReads is the text of all that the tenant can read about its
// Releases: inventories, Release status and the Events of its namespace.
func (tn *tenant) everythingTheTenantReads(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	rels, invs, events := &v1alpha1.ReleaseList{}, &v1alpha1.ReleaseInventoryList{}, &corev1.EventList{}
	for _, l := range []client.ObjectList{rels, invs, events} {
		must(t, tn.c.List(ctx, l, client.InNamespace(tn.ns)))
	}
	fmt.Fprintf(&b, "%+v\n%+v\n", rels.Items, invs.Items)
	for _, e := range events.Items {
		fmt.Fprintf(&b, "%s %s\n", e.Reason, e.Message)
	}
	return b.String()
}

// TestConfusedDeputy: a tenant's inventory names a Secret of kube-system and a ConfigMap
// of another tenant, under a rule that copies an object's data into the message the
// tenant reads. The observer reads them as the tenant's read identity: each entry is
// Unknown with the 403 and how to grant the read, and no value of either object reaches
// anything the tenant can read. Its own ConfigMap, read the same way under the same
// rule, does show its data: the rule would have copied the others'.
func TestConfusedDeputy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alice, bob := newTenant(t, "alice"), newTenant(t, "bob")
	const (
		systemSecret = "SYSTEM-SECRET-hunter2"
		bobsSecret   = "BOBS-SECRET-value"
		alicesData   = "alices-own-data"
	)
	secretName := "db-" + alice.ns
	must(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: "kube-system"},
		StringData: map[string]string{"password": systemSecret}}))
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: "kube-system"}})
	})
	must(t, bob.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "private", Namespace: bob.ns},
		Data: map[string]string{"k": bobsSecret}}))
	must(t, alice.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: alice.ns},
		Data: map[string]string{"k": alicesData}}))
	must(t, alice.c.Create(ctx, &extv1alpha1.HealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: "copy", Namespace: alice.ns},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{copyRule}}}))
	must(t, alice.c.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: alice.ns}}))
	alice.release(t, "deputy", "local",
		entryOf("", "v1", "configmaps", "ConfigMap", alice.ns, "own"),
		entryOf("", "v1", "secrets", "Secret", "kube-system", secretName),
		entryOf("", "v1", "configmaps", "ConfigMap", bob.ns, "private"))
	inv, _ := alice.assessed(t, "deputy")

	identity := "system:serviceaccount:" + alice.ns + ":" + readerRole
	for _, e := range inv.Entries {
		switch e.Name {
		case "own":
			if !strings.Contains(e.Message, alicesData) {
				t.Errorf("positive control: the tenant's own ConfigMap has message %q, want its data through the rule", e.Message)
			}
		default:
			if e.State != v1alpha1.StateUnknown || !strings.Contains(e.Message, "403 Forbidden: "+identity+" may not get") ||
				!strings.Contains(e.Message, "kubectl create rolebinding") {
				t.Errorf("entry %s/%s: %s %q; want Unknown, the 403 of the read identity %s and how to grant the read", e.Namespace, e.Name, e.State, e.Message, identity)
			}
		}
	}
	// Give the loop a few more passes to say more, then look at everything.
	time.Sleep(2 * time.Second)
	all := alice.everythingTheTenantReads(t)
	for _, s := range []string{systemSecret, base64.StdEncoding.EncodeToString([]byte(systemSecret)), bobsSecret} {
		if i := strings.Index(all, s); i >= 0 {
			t.Errorf("the tenant reads %q through the observer: …%s…", s, all[max(0, i-200):min(len(all), i+len(s)+50)])
		}
	}
}

// recorder is a TLS server that a tenant's kubeconfig names: it records the
// Authorization header of every request it gets.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	auth []string
}

func newRecorder(t *testing.T, tls bool) *recorder {
	r := &recorder{}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("SERVER-CHOSEN-TEXT"))
	})
	if tls {
		r.srv = httptest.NewTLSServer(h)
	} else {
		r.srv = httptest.NewServer(h)
	}
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.auth...)
}

// caData is the PEM of the recorder's certificate, for certificate-authority-data.
func (r *recorder) caData() string {
	if r.srv.Certificate() == nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw}))
}

// TestHostileKubeconfig: a tenant's kubeconfig Secret that asks the observer to run a
// command, to send the token file of its pod, to act as another user, to talk plain
// HTTP to a server of the tenant's choosing, or that names an https server which
// redirects every read to such a server. None runs, none is sent, no request reaches
// the server, and the Release's Healthy condition says which field was refused and which
// flag would allow it. A kubeconfig with a plain token, to the same kind of server,
// does reach it (the positive control).
func TestHostileKubeconfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alice := newTenant(t, "mallory")
	marker := filepath.Join(t.TempDir(), "the-command-ran")
	// The token file of the observer's pod, as the kubelet mounts it.
	tokenFile := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(tokenFile, []byte(observerToken), 0o600))
	srv := newRecorder(t, true)
	plain := newRecorder(t, false)
	// An https server that sends every read on to the plain-http one: a redirect is not
	// followed (it would carry the read, and the token, to a host no check saw).
	redirector := httptest.NewTLSServer(http.RedirectHandler(plain.srv.URL+"/latest/meta-data", http.StatusFound))
	t.Cleanup(redirector.Close)
	redirectorCA := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: redirector.Certificate().Raw}))
	execUser := fmt.Sprintf(`{exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: /bin/sh, args: ["-c", "touch %s; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'"]}}`, marker)
	kubeconfig := func(server, ca, user, current string) string {
		cluster := fmt.Sprintf("{server: %q}", server)
		if ca != "" {
			cluster = fmt.Sprintf("{server: %q, certificate-authority-data: %s}", server, ca)
		}
		return fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: %s}]\nusers: [{name: u, user: %s}]\n"+
			"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: %q\n", cluster, user, current)
	}
	cases := []struct {
		name, kubeconfig string
		want             []string // in the condition's message
	}{
		{"exec", kubeconfig(srv.srv.URL, srv.caData(), execUser, "c"), []string{"exec", "--insecure-kubeconfig-exec"}},
		{"exec-no-current-context", kubeconfig(srv.srv.URL, srv.caData(), execUser, ""), []string{"current-context"}},
		{"exec-in-another-user", strings.Replace(kubeconfig(srv.srv.URL, srv.caData(), "{token: t}", "c"), "users: [",
			"users: [{name: other, user: "+execUser+"}, ", 1), []string{"exec", "--insecure-kubeconfig-exec"}},
		{"token-file", kubeconfig(srv.srv.URL, srv.caData(), fmt.Sprintf("{tokenFile: %q}", tokenFile), "c"), []string{"tokenFile", "--insecure-kubeconfig-files"}},
		{"act-as", kubeconfig(srv.srv.URL, srv.caData(), "{token: t, as: system:admin}", "c"), []string{"as"}},
		{"plain-http", kubeconfig(plain.srv.URL, "", "{token: t}", "c"), []string{"http", "--insecure-target-http"}},
		{"redirect", kubeconfig(redirector.URL, redirectorCA, "{token: t}", "c"), []string{"302"}},
	}
	for _, c := range cases {
		must(t, alice.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: alice.ns},
			StringData: map[string]string{"value": c.kubeconfig}}))
		must(t, alice.c.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: alice.ns},
			Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: c.name}}}))
		alice.release(t, c.name, c.name, entryOf("", "v1", "configmaps", "ConfigMap", "default", "x"))
	}
	// The positive control: the same server, a plain token.
	must(t, alice.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "control", Namespace: alice.ns},
		StringData: map[string]string{"value": kubeconfig(srv.srv.URL, srv.caData(), "{token: tenant-token}", "c")}}))
	must(t, alice.c.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "control", Namespace: alice.ns},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "control"}}}))
	alice.release(t, "control", "control", entryOf("", "v1", "configmaps", "ConfigMap", "default", "x"))

	for _, c := range cases {
		cond := alice.conditionOf(t, c.name, func(c *metav1.Condition) bool { return c.Reason == v1alpha1.ReasonUnknown })
		for _, w := range c.want {
			if !strings.Contains(cond.Message, w) {
				t.Errorf("%s: condition %q; want it to name %q", c.name, cond.Message, w)
			}
		}
	}
	alice.conditionOf(t, "control", func(c *metav1.Condition) bool { return c.Reason == v1alpha1.ReasonUnknown })
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the kubeconfig's exec command ran in the observer")
	}
	var control int
	for _, a := range srv.seen() {
		switch a {
		case "Bearer tenant-token":
			control++
		default:
			t.Errorf("the tenant's server got a request with Authorization %.24q…; only the control's token may reach it", a)
		}
	}
	if control == 0 {
		t.Errorf("positive control: the kubeconfig with a plain token never reached the tenant's server")
	}
	if n := len(plain.seen()); n != 0 {
		t.Errorf("the plain-HTTP server got %d requests", n)
	}
	all := alice.everythingTheTenantReads(t)
	for _, s := range []string{observerToken, "SERVER-CHOSEN-TEXT"} {
		if strings.Contains(all, s) {
			t.Errorf("the tenant reads %.20q… through the observer", s)
		}
	}
}

// TestTenantCannotForgeResults: what the observer and the convoy controller write is not
// the tenant's to write: its ReleaseInventory (the entries the observer reads, and their
// states), its Release's status, GlobalHealthRuleSets (the rules of every tenant), and
// the binding of a read identity. The tenant's own kinds it may write (the positive
// control).
func TestTenantCannotForgeResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eve := newTenant(t, "eve")
	must(t, eve.c.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: eve.ns}}))
	must(t, eve.c.Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: eve.ns},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "local"}}}))
	forbidden := map[string]error{
		"create a ReleaseInventory": eve.c.Create(ctx, &v1alpha1.ReleaseInventory{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: eve.ns},
			Entries: []v1alpha1.InventoryEntry{entryOf("", "v1", "secrets", "Secret", "kube-system", "x")}}),
		"write a Release's status": eve.c.Status().Apply(ctx, acv1alpha1.Release("app", eve.ns).WithStatus(acv1alpha1.ReleaseStatus().
			WithLastAttempted(acv1alpha1.AttemptStatus().WithRenderRef("forged"))), client.FieldOwner("eve"), client.ForceOwnership),
		"create a GlobalHealthRuleSet": eve.c.Create(ctx, &extv1alpha1.GlobalHealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: "eve-" + eve.ns},
			Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{copyRule}}}),
		"bind the read role in its namespace": eve.c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "more", Namespace: eve.ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: eve.ns}}}),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the tenant could %s: %v, want 403", what, err)
		}
	}
}
