package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const (
	cmManager  = "convoy-controller-manager"
	obsManager = "convoy-health-inventory"
)

// apply server-side applies obj (an unstructured object) as manager, forcing ownership.
func apply(t *testing.T, manager string, obj map[string]any) error {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	return env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership)
}

func mustApply(t *testing.T, manager string, obj map[string]any) {
	t.Helper()
	if err := apply(t, manager, obj); err != nil {
		t.Fatalf("apply as %s: %v", manager, err)
	}
}

func inventory(name string, entries ...map[string]any) map[string]any {
	list := make([]any, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	return map[string]any{
		"apiVersion": "convoy.kumodo.io/v1alpha1",
		"kind":       "ReleaseInventory",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"entries":    list,
	}
}

func entry(group, kind, ns, name string, fields map[string]any) map[string]any {
	e := map[string]any{"group": group, "kind": kind, "namespace": ns, "name": name}
	for k, v := range fields {
		e[k] = v
	}
	return e
}

func getInventory(t *testing.T, name string) *v1alpha1.ReleaseInventory {
	t.Helper()
	inv := &v1alpha1.ReleaseInventory{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, inv); err != nil {
		t.Fatalf("get inventory %s: %v", name, err)
	}
	return inv
}

func TestCRDsInstalled(t *testing.T) {
	t.Parallel()
	want := map[schema.GroupVersionKind]bool{ // kind => namespaced
		v1alpha1.GroupVersion.WithKind("Release"):                true,
		v1alpha1.GroupVersion.WithKind("ReleaseInventory"):       true,
		v1alpha1.GroupVersion.WithKind("Cluster"):                true,
		extv1alpha1.GroupVersion.WithKind("HealthRuleSet"):       true,
		extv1alpha1.GroupVersion.WithKind("GlobalHealthRuleSet"): false,
	}
	for gvk, namespaced := range want {
		got, err := env.Client.IsObjectNamespaced(objectFor(gvk))
		if err != nil {
			t.Errorf("%s is not served: %v", gvk.Kind, err)
			continue
		}
		if got != namespaced {
			t.Errorf("%s namespaced = %v, want %v", gvk.Kind, got, namespaced)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := env.Client.List(context.Background(), list); err != nil {
			t.Errorf("list %s: %v", gvk.Kind, err)
		}
	}
}

// TestInventoryTwoManagers: the controller-manager and the observer share the entries of
// one ReleaseInventory, and each re-apply keeps the other's fields.
func TestInventoryTwoManagers(t *testing.T) {
	t.Parallel()
	const name = "two-managers"
	cm := func(wave int64, renderRef string) map[string]any {
		return inventory(name,
			entry("apps", "Deployment", "demo", "web", map[string]any{"version": "v1", "resource": "deployments", "wave": wave, "renderRef": renderRef}),
			entry("", "PersistentVolume", "", "pv1", map[string]any{"version": "v1", "resource": "persistentvolumes", "wave": int64(0), "renderRef": renderRef}),
		)
	}
	obs := func(state, msg string) map[string]any {
		return inventory(name,
			entry("apps", "Deployment", "demo", "web", map[string]any{"state": state, "message": msg, "firstUnhealthy": "2026-01-02T03:04:05Z", "assessedRenderRef": "r1"}),
			entry("", "PersistentVolume", "", "pv1", map[string]any{"state": "Healthy", "assessedRenderRef": "r1"}),
		)
	}
	mustApply(t, cmManager, cm(1, "r1"))
	mustApply(t, obsManager, obs("Progressing", "1/3 available"))
	mustApply(t, cmManager, cm(2, "r2")) // the controller-manager re-applies
	inv := getInventory(t, name)
	if len(inv.Entries) != 2 {
		t.Fatalf("entries = %d, want 2: %+v", len(inv.Entries), inv.Entries)
	}
	web := inv.Entries[0]
	if web.Name != "web" {
		web = inv.Entries[1]
	}
	if web.State != v1alpha1.StateProgressing || web.Message != "1/3 available" || web.FirstUnhealthy == nil || web.AssessedRenderRef != "r1" {
		t.Errorf("observer fields lost after the controller-manager's re-apply: %+v", web)
	}
	if web.GetWave() != 2 || web.RenderRef != "r2" {
		t.Errorf("controller-manager fields not updated: %+v", web)
	}
	mustApply(t, obsManager, obs("Healthy", "")) // the observer re-applies
	inv = getInventory(t, name)
	for _, e := range inv.Entries {
		if e.Version != "v1" || e.Resource == "" || e.RenderRef != "r2" || e.Wave == nil {
			t.Errorf("controller-manager fields lost after the observer's re-apply: %+v", e)
		}
	}
	// The observer's message was dropped from its apply, so it is gone.
	for _, e := range inv.Entries {
		if e.Name == "web" && (e.State != v1alpha1.StateHealthy || e.Message != "") {
			t.Errorf("observer re-apply not reflected: %+v", e)
		}
	}
	assertOwners(t, inv, cmManager, "f:renderRef", "f:wave", "f:version", "f:resource")
	assertOwners(t, inv, obsManager, "f:state", "f:assessedRenderRef")
}

// assertOwners checks that manager's managedFields entry names each field.
func assertOwners(t *testing.T, inv *v1alpha1.ReleaseInventory, manager string, fields ...string) {
	t.Helper()
	for _, mf := range inv.ManagedFields {
		if mf.Manager != manager || mf.FieldsV1 == nil {
			continue
		}
		raw := mf.FieldsV1.GetRawString()
		for _, f := range fields {
			if !strings.Contains(raw, `"`+f+`"`) {
				t.Errorf("manager %s does not own %s: %s", manager, f, raw)
			}
		}
		return
	}
	t.Errorf("no managedFields entry for %s", manager)
}

// TestInventoryEntryKeys: a cluster-scoped core object and a namespaced object with the
// same kind and name, and two objects that differ only by group, are distinct entries;
// re-applying never duplicates one (shared/cases 20 and 22).
func TestInventoryEntryKeys(t *testing.T) {
	t.Parallel()
	const name = "entry-keys"
	all := []map[string]any{
		entry("", "PersistentVolume", "", "pv1", map[string]any{"version": "v1"}),
		entry("", "PersistentVolume", "demo", "pv1", map[string]any{"version": "v1"}),
		entry("apps", "Deployment", "demo", "app1", map[string]any{"version": "v1"}),
		entry("example.io", "Deployment", "demo", "app1", map[string]any{"version": "v1"}),
	}
	mustApply(t, cmManager, inventory(name, all...))
	mustApply(t, cmManager, inventory(name, all...))
	// Another manager applies the cluster-scoped entry alone, namespace "" explicit.
	mustApply(t, obsManager, inventory(name, entry("", "PersistentVolume", "", "pv1", map[string]any{"state": "Healthy"})))
	inv := getInventory(t, name)
	if len(inv.Entries) != 4 {
		t.Fatalf("entries = %d, want 4: %+v", len(inv.Entries), inv.Entries)
	}
	seen := map[string]int{}
	for _, e := range inv.Entries {
		seen[e.Group+"/"+e.Kind+"/"+e.Namespace+"/"+e.Name]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("entry %s appears %d times", k, n)
		}
	}
	// An entry that leaves a key out is refused: every key is required (case 20).
	omitted := map[string]any{"group": "", "kind": "PersistentVolume", "name": "pv1", "state": "Healthy"}
	err := apply(t, obsManager, inventory(name, omitted))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("entry without namespace: want 422 Invalid, got %v", err)
	}
	if got := len(getInventory(t, name).Entries); got != 4 {
		t.Fatalf("entries after the refused apply = %d, want 4", got)
	}
}

// TestReleaseStatusTwoManagers: two managers own two condition types of one Release's
// status without clobbering each other.
func TestReleaseStatusTwoManagers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: "two-conditions", Namespace: "default"},
		Spec:       v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "local"}},
	}
	if err := env.Client.Create(ctx, rel); err != nil {
		t.Fatal(err)
	}
	status := func(condType, condStatus string, extra map[string]any) *unstructured.Unstructured {
		st := map[string]any{"conditions": []any{map[string]any{
			"type": condType, "status": condStatus, "reason": "Test", "message": "",
			"lastTransitionTime": "2026-01-01T00:00:00Z",
		}}}
		for k, v := range extra {
			st[k] = v
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "Release",
			"metadata": map[string]any{"name": rel.Name, "namespace": rel.Namespace},
			"status":   st,
		}}
	}
	applyStatus := func(manager string, u *unstructured.Unstructured) {
		t.Helper()
		if err := env.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership); err != nil {
			t.Fatalf("status apply as %s: %v", manager, err)
		}
	}
	applyStatus(cmManager, status("Ready", "False", map[string]any{"lastAttempted": map[string]any{"renderRef": "r1"}}))
	applyStatus("convoy-health", status("Healthy", "True", map[string]any{"healthSummary": map[string]any{"total": int64(1), "healthy": int64(1), "progressing": int64(0), "degraded": int64(0), "unknown": int64(0)}}))
	applyStatus(cmManager, status("Ready", "True", map[string]any{"lastAttempted": map[string]any{"renderRef": "r2"}}))
	applyStatus("convoy-health", status("Healthy", "False", map[string]any{"healthSummary": map[string]any{"total": int64(1), "healthy": int64(0), "progressing": int64(1), "degraded": int64(0), "unknown": int64(0)}}))

	got := &v1alpha1.Release{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rel), got); err != nil {
		t.Fatal(err)
	}
	conds := map[string]string{}
	for _, c := range got.Status.Conditions {
		conds[c.Type] = string(c.Status)
	}
	if conds["Ready"] != "True" || conds["Healthy"] != "False" || len(conds) != 2 {
		t.Errorf("conditions = %v, want Ready=True and Healthy=False", conds)
	}
	if got.GetLastAttemptedRenderRef() != "r2" {
		t.Errorf("lastAttempted.renderRef = %q, want r2", got.GetLastAttemptedRenderRef())
	}
	if got.Status.HealthSummary == nil || got.Status.HealthSummary.Progressing != 1 {
		t.Errorf("healthSummary = %+v", got.Status.HealthSummary)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
