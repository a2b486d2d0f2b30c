package healthloop

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// TestFieldOwnership: after the observer's writes the controller-manager still owns the
// keys, version, resource, wave and renderRef, and re-applies them without a conflict
// (fixture.inventory does not force).
func TestFieldOwnership(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "false")
	f.inventory(cm("a", 0, "r1"))
	f.pass()
	f.inventory(cm("a", 3, "r2")) // non-forced: a conflict fails the test
	inv := f.getInventory()
	own, err := inventory.ReadOwnership(inv)
	must(t, err)
	k := inventory.Key{Kind: "ConfigMap", Namespace: f.ns, Name: "a"}
	if !own.EntryOwnedBy(cmManager, k) || !own.EntryOwnedBy(inventory.FieldManagerInventory, k) {
		t.Fatal("the entry is not co-owned by both managers")
	}
	for _, mf := range inv.ManagedFields {
		raw := mf.FieldsV1.GetRawString()
		switch mf.Manager {
		case cmManager:
			for _, fld := range []string{"f:version", "f:resource", "f:wave", "f:renderRef"} {
				if !strings.Contains(raw, fld) {
					t.Errorf("controller-manager lost %s: %s", fld, raw)
				}
			}
		case inventory.FieldManagerInventory:
			for _, fld := range []string{"f:version", "f:resource", "f:wave", "f:renderRef"} {
				if strings.Contains(raw, fld) {
					t.Errorf("the observer took %s: %s", fld, raw)
				}
			}
		}
	}
	e := f.entry("a")
	if e.GetWave() != 3 || e.RenderRef != "r2" || e.State != v1alpha1.StateProgressing {
		t.Fatalf("entry = %+v", e)
	}
}

// TestDroppedEntryVanishes: an entry that the controller-manager no longer records
// vanishes from the inventory after the observer's next pass, also when it was the
// last one (docs/design.md, "Objects and owners").
func TestDroppedEntryVanishes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.configMap("b", "true")
	f.inventory(cm("a", 0, ""), cm("b", 0, ""))
	f.pass()
	f.inventory(cm("a", 0, ""))
	if n := len(f.getInventory().Entries); n != 2 {
		t.Fatalf("precondition: the observer's ownership keeps b alive until its next pass (entries = %d)", n)
	}
	f.pass()
	if es := f.getInventory().Entries; len(es) != 1 || es[0].Name != "a" {
		t.Fatalf("entries = %+v, want only a", es)
	}
	f.inventory()
	f.pass()
	if es := f.getInventory().Entries; len(es) != 0 {
		t.Fatalf("entries = %+v, want none", es)
	}
	if s := f.getRelease().Status.HealthSummary; s == nil || s.Total != 0 {
		t.Fatalf("summary = %+v", s)
	}
}

// TestClusterScopedAndNamespacedEntries: group "" and namespace "" are keys like any
// other; a PersistentVolume and a namespaced object of the same kind and name are two
// entries, each assessed once.
func TestClusterScopedAndNamespacedEntries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("pv1", "true")
	f.inventory(
		cmEntry{version: "v1", kind: "PersistentVolume", resource: "persistentvolumes", name: "pv1"},
		cm("pv1", 0, ""),
	)
	f.pass()
	f.pass()
	inv := f.getInventory()
	if len(inv.Entries) != 2 {
		t.Fatalf("entries = %+v", inv.Entries)
	}
	for _, e := range inv.Entries {
		switch e.Kind {
		case "PersistentVolume":
			if e.Namespace != "" || e.State != v1alpha1.StateUnknown || e.Message != "object not found" {
				t.Errorf("PV entry = %+v", e)
			}
		case "ConfigMap":
			if e.State != v1alpha1.StateHealthy {
				t.Errorf("ConfigMap entry = %+v", e)
			}
		}
	}
}

// TestFieldManagerNames: the observer's writes carry exactly the field managers that the
// spec names (spec "Writes", "Hook polling"); the names are spelled out here, not taken
// from the constants, so a renamed constant fails.
func TestFieldManagerNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("true")
	f.preHook(t0, complete("")...)
	f.pass()
	owners := func(mfs []metav1.ManagedFieldsEntry) map[string]string {
		m := map[string]string{}
		for _, mf := range mfs {
			if mf.FieldsV1 != nil {
				m[mf.Manager+"/"+mf.Subresource] += mf.FieldsV1.GetRawString()
			}
		}
		return m
	}
	rel := owners(f.getRelease().ManagedFields)
	if s := rel["convoy-health/status"]; !strings.Contains(s, `k:{\"type\":\"Healthy\"}`) || !strings.Contains(s, "f:healthSummary") {
		t.Fatalf("convoy-health does not own the Healthy condition and healthSummary: %v", rel)
	}
	inv := owners(f.getInventory().ManagedFields)
	if s := inv["convoy-health-inventory/"]; !strings.Contains(s, "f:entries") || !strings.Contains(s, "f:state") {
		t.Fatalf("convoy-health-inventory does not own the entries' state: %v", inv)
	}
	if s := inv["convoy-hook-status/"]; !strings.Contains(s, "f:hooks") || !strings.Contains(s, "f:finishedAt") {
		t.Fatalf("convoy-hook-status does not own the hooks' state: %v", inv)
	}
}

// TestDroppedHookVanishes: a hook that the controller-manager no longer records vanishes
// after the next pass, although nothing else about the hooks changed.
func TestDroppedHookVanishes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.hooks(hook{name: "a", kind: "Job", workload: "none-a", createdAt: t0.Add(-time.Minute)},
		hook{name: "b", kind: "Job", workload: "none-b", createdAt: t0.Add(-time.Minute)})
	f.pass()
	f.expectHook("b", v1alpha1.HookFailed, "workload not found")
	f.hooks(hook{name: "a", kind: "Job", workload: "none-a", createdAt: t0.Add(-time.Minute)})
	f.pass()
	if hs := f.getInventory().Hooks; len(hs) != 1 || hs[0].Name != "a" {
		t.Fatalf("hooks = %+v, want only a", hs)
	}
}
