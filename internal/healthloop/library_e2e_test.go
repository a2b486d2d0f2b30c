package healthloop

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health/library"
)

// TestLibraryJudgesCustomResources runs the loop on the real API server with the whole
// rule library selected: a Release whose inventory holds a Crossplane managed resource
// (a namespaced Upbound Bucket, matched by the wildcard rule of "*.upbound.io/*") and an
// ExternalSecret, neither Ready, is Progressing with both entries judged; once both are
// Ready it is Healthy. Without the library both would pass unjudged.
func TestLibraryJudgesCustomResources(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	crd(t, f, "s3.aws.m.upbound.io", "v1beta1", "Bucket", "buckets")
	crd(t, f, "external-secrets.io", "v1", "ExternalSecret", "externalsecrets")

	sets, err := library.RuleSets()
	must(t, err)
	// Labelled for this test only, so no other test's selector meets them.
	label := map[string]string{"e2e-library": f.ns}
	for i := range sets {
		s := sets[i].DeepCopy()
		s.Name = f.ns + "-" + s.Name
		s.Labels = label
		must(t, env.Client.Create(f.ctx, s))
		t.Cleanup(func() { _ = env.Client.Delete(f.ctx, s) })
	}
	f.release(&v1alpha1.HealthAssessment{GlobalRuleSetSelector: &metav1.LabelSelector{MatchLabels: label}}, 0)

	bucket := object("s3.aws.m.upbound.io/v1beta1", "Bucket", f.ns, "assets", map[string]any{
		"forProvider": map[string]any{"region": "eu-west-1"}}, conditions(
		"Ready", "False", "Creating", "", "Synced", "False", "ReconcileError", "create failed: AccessDenied: not authorized to perform s3:CreateBucket"))
	secret := object("external-secrets.io/v1", "ExternalSecret", f.ns, "db-credentials", map[string]any{
		"secretStoreRef": map[string]any{"name": "vault", "kind": "ClusterSecretStore"}}, conditions(
		"Ready", "False", "SecretSyncedError", "could not get secret data from provider"))
	apply(t, f, bucket)
	apply(t, f, secret)
	f.inventory(
		cmEntry{group: "s3.aws.m.upbound.io", version: "v1beta1", kind: "Bucket", resource: "buckets", name: "assets", renderRef: "r1"},
		cmEntry{group: "external-secrets.io", version: "v1", kind: "ExternalSecret", resource: "externalsecrets", name: "db-credentials", renderRef: "r1"},
	)
	f.lastAttempted("r1")

	f.pass()
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	if e := f.entry("assets"); e.State != v1alpha1.StateProgressing || !strings.Contains(e.Message, "Ready=False Creating") {
		t.Errorf("Bucket entry %s %q, want Progressing naming Ready=False Creating", e.State, e.Message)
	}
	if e := f.entry("db-credentials"); e.State != v1alpha1.StateProgressing {
		t.Errorf("ExternalSecret entry %s %q, want Progressing", e.State, e.Message)
	}

	bucket.Object["status"] = conditions("Ready", "True", "Available", "", "Synced", "True", "ReconcileSuccess", "")
	apply(t, f, bucket)
	secret.Object["status"] = conditions("Ready", "True", "SecretSynced", "secret synced")
	apply(t, f, secret)
	f.clock.Step(time.Minute)
	f.passHealthy()
}

// crd installs a namespaced CustomResourceDefinition whose objects keep any field
// (status included: no status subresource) and waits until it is served.
func crd(t *testing.T, f *fixture, group, version, kind, plural string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": plural, "singular": strings.ToLower(kind), "listKind": kind + "List"},
			"versions": []any{map[string]any{"name": version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	err := env.Client.Create(f.ctx, u)
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind + "List"})
	eventually(t, "CRD "+plural+"."+group+" served", func() bool {
		return env.Client.List(f.ctx, list, client.InNamespace(f.ns)) == nil
	})
}

// object builds a namespaced custom resource with a spec and a status.
func object(apiVersion, kind, ns, name string, spec, status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec, "status": status,
	}}
}

// conditions is a status with conditions given as type, status, reason, message in turn.
func conditions(fields ...string) map[string]any {
	var list []any
	for i := 0; i+3 < len(fields); i += 4 {
		list = append(list, map[string]any{"type": fields[i], "status": fields[i+1], "reason": fields[i+2], "message": fields[i+3],
			"lastTransitionTime": "2026-11-29T12:00:00Z"})
	}
	return map[string]any{"conditions": list}
}

// apply writes u as the test's field manager.
func apply(t *testing.T, f *fixture, u *unstructured.Unstructured) {
	t.Helper()
	must(t, env.Client.Apply(f.ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("test"), client.ForceOwnership))
}
