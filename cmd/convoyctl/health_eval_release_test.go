package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestHealthEvalRelease: health eval --release evaluates a live Release's recorded
// objects, read from its Cluster as the Cluster's read identity, with the sets the
// Release selects plus a candidate file, and prints beside each the state recorded; it
// writes nothing. Without a grant for the read identity, an entry is Unknown with the
// refusal, never read with the caller's rights.
func TestHealthEvalRelease(t *testing.T) {
	env := controlPlane(t)
	kubeconfig := adminKubeconfig(t, env)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const ns = "dryrun"
	must(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"}}))
	must(env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: "ready", Namespace: ns, Labels: map[string]string{"set": "ready"}},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"},
			RuleExpression: "object.?data.?ready.orValue('') == 'true'", MessageExpression: "'not ready'"}}}}))
	must(env.Client.Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"},
			HealthAssessment: &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": "ready"}}}}}))
	for name, ready := range map[string]string{"a": "true", "b": "false"} {
		must(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string]string{"ready": ready, "size": "big"}}))
	}
	var list []any
	for _, name := range []string{"a", "b", "gone"} {
		list = append(list, map[string]any{"group": "", "kind": "ConfigMap", "namespace": ns, "name": name,
			"version": "v1", "resource": "configmaps", "wave": int64(0), "renderRef": "r1"})
	}
	inv := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "ReleaseInventory",
		"metadata": map[string]any{"name": "shop", "namespace": ns}, "entries": list}}
	must(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(inv), client.FieldOwner(cmManager), client.ForceOwnership))
	// The observer's record of b, for "recorded".
	obs := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "ReleaseInventory",
		"metadata": map[string]any{"name": "shop", "namespace": ns}, "entries": []any{map[string]any{"group": "", "kind": "ConfigMap", "namespace": ns, "name": "b",
			"state": "Progressing", "message": "not ready", "firstUnhealthy": "2026-01-01T00:00:00Z"}}}}
	must(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obs), client.FieldOwner("convoy-health-inventory"), client.ForceOwnership))
	before := &v1alpha1.ReleaseInventory{}
	must(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, before))

	args := []string{"health", "eval", "--release", ns + "/shop", "--kubeconfig", kubeconfig, "--now", "2026-01-01T00:10:00Z"}

	// A candidate set that also wants data.size == "small": a fails it now.
	candidate := writeFile(t, "candidate.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: HealthRuleSet
metadata: {name: size, namespace: dryrun}
spec:
  rules:
  - {apiVersion: v1, resources: [configmaps], ruleExpression: "object.data.size == 'small'", messageExpression: "'too big'"}
`)
	want := `{"apiVersion":"v1","kind":"ConfigMap","namespace":"dryrun","name":"a","state":"Progressing","message":"too big","decidedBy":{"kind":"HealthRuleSet","namespace":"dryrun","name":"size","rule":0,"cause":"RuleFailed"},"rulesApplied":2,"recorded":{"state":"","message":""}}
{"apiVersion":"v1","kind":"ConfigMap","namespace":"dryrun","name":"b","state":"Progressing","message":"not ready","decidedBy":{"kind":"HealthRuleSet","namespace":"dryrun","name":"ready","rule":0,"cause":"RuleFailed"},"rulesApplied":2,"recorded":{"state":"Progressing","message":"not ready"}}
{"apiVersion":"v1","kind":"ConfigMap","namespace":"dryrun","name":"gone","state":"Unknown","message":"object not found","rulesApplied":2,"recorded":{"state":"","message":""}}
`
	code, stdout, stderr := runCLI(append(args, "--rules", candidate)...)
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q\ngot\n%s\nwant\n%s", code, stderr, stdout, want)
	}

	// A caller that may read the Release, its inventory and rules, and the ConfigMaps
	// itself, but not impersonate the read identity: every entry is Unknown with the
	// refusal; the caller's own rights never read a target object.
	must(env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auditor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"convoy.kumodo.io", "extensions.convoy.kumodo.io", ""},
			Resources: []string{"releases", "releaseinventories", "clusters", "healthrulesets", "configmaps"}, Verbs: []string{"get", "list", "watch"}}}}))
	must(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auditor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "auditor"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "auditor"}}}))
	kc, err := env.UserKubeconfig("auditor")
	must(err)
	auditor := writeFile(t, "auditor.kubeconfig", string(kc))
	code, stdout, stderr = runCLI("health", "eval", "--release", ns+"/shop", "--kubeconfig", auditor)
	if code != 0 || strings.Count(stdout, `"state":"Unknown","message":"cannot read object: 403 Forbidden`) != 3 || !strings.Contains(stdout, "impersonat") {
		t.Errorf("a caller that may not impersonate: exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	after := &v1alpha1.ReleaseInventory{}
	must(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, after))
	if after.ResourceVersion != before.ResourceVersion {
		t.Error("health eval --release wrote the ReleaseInventory")
	}

	// Usage and read errors.
	assertRun(t, append(args, "--object", candidate), exitUsage, "", "--object, --deadline")
	assertRun(t, []string{"health", "eval", "--release", "shop", "--kubeconfig", kubeconfig}, exitUsage, "", "want NAMESPACE/NAME")
	assertRun(t, []string{"health", "eval", "--release", ns + "/nope", "--kubeconfig", kubeconfig}, exitClusterError, "", "reading Release dryrun/nope")
	assertRun(t, []string{"health", "eval", "--rules", candidate}, exitUsage, "", "give --rules and --object")
}
