package inventory

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

func TestSummarizeAndRenderCurrent(t *testing.T) {
	t.Parallel()
	entries := []v1alpha1.InventoryEntry{
		{Name: "a", State: v1alpha1.StateHealthy, RenderRef: "r1"},
		{Name: "b", State: v1alpha1.StateProgressing, RenderRef: "r1"},
		{Name: "c", State: v1alpha1.StateDegraded, RenderRef: "r1"},
		{Name: "d", State: v1alpha1.StateUnknown, RenderRef: "r1"},
		{Name: "e", RenderRef: "r0"}, // not assessed yet
	}
	want := v1alpha1.HealthSummary{Total: 5, Healthy: 1, Progressing: 1, Degraded: 1, Unknown: 2}
	if got := Summarize(entries); got != want {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	if RenderCurrent("r1", entries) {
		t.Fatal("renderCurrent with an entry of r0")
	}
	if !RenderCurrent("r1", entries[:4]) || !RenderCurrent("anything", nil) {
		t.Fatal("renderCurrent false for matching or no entries")
	}
}

func TestKeyString(t *testing.T) {
	t.Parallel()
	cases := map[Key]string{
		{Kind: "PersistentVolume", Name: "pv1"}:                             "PersistentVolume pv1",
		{Group: "apps", Kind: "Deployment", Namespace: "demo", Name: "web"}: "Deployment.apps demo/web",
	}
	for k, want := range cases {
		if got := k.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", k, got, want)
		}
	}
}

// TestRecordedFromManagedFields: an entry or hook is recorded while a manager other
// than the observer's owns it; one only the observer owns is a leftover to drop.
func TestRecordedFromManagedFields(t *testing.T) {
	t.Parallel()
	cm := `{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"}":{".":{},"f:group":{},"f:kind":{},"f:name":{},"f:namespace":{}}},` +
		`"f:hooks":{"k:{\"name\":\"pre\"}":{".":{},"f:name":{}}}}`
	obs := `{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"}":{".":{},"f:state":{}},` +
		`"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"gone\",\"namespace\":\"d\"}":{".":{},"f:state":{}}}}`
	hooks := `{"f:hooks":{"k:{\"name\":\"old\"}":{".":{},"f:state":{}}}}`
	for _, compacted := range []bool{false, true} {
		recordedFromManagedFields(t, cm, obs, hooks, compacted)
	}
}

// recordedFromManagedFields is TestRecordedFromManagedFields on the inventory as it is
// or as the observer's cache keeps it (CompactForCache): the same answers.
func recordedFromManagedFields(t *testing.T, cm, obs, hooks string, compacted bool) {
	t.Helper()
	inv := &v1alpha1.ReleaseInventory{
		ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "convoy-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(cm)},
			{Manager: FieldManagerInventory, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(obs)},
			{Manager: FieldManagerHookStatus, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(hooks)},
		}},
		Entries: []v1alpha1.InventoryEntry{{Kind: "ConfigMap", Namespace: "d", Name: "a"}, {Kind: "ConfigMap", Namespace: "d", Name: "gone"}},
		Hooks:   []v1alpha1.HookEntry{{Name: "pre"}, {Name: "old"}},
	}
	if compacted {
		before := len(inv.ManagedFields[0].FieldsV1.GetRawBytes())
		if _, err := CompactForCache(inv); err != nil {
			t.Fatal(err)
		}
		if after := len(inv.ManagedFields[0].FieldsV1.GetRawBytes()); after >= before {
			t.Fatalf("compacted managedFields of %d bytes, was %d", after, before)
		}
	}
	entries, stale, err := RecordedEntries(inv, FieldManagerInventory)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name != "a" || !stale {
		t.Fatalf("compacted %v: entries = %v, stale = %v", compacted, entries, stale)
	}
	hs, staleHooks, err := RecordedHooks(inv, FieldManagerHookStatus)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Name != "pre" || !staleHooks {
		t.Fatalf("compacted %v: hooks = %v, stale = %v", compacted, hs, staleHooks)
	}
	// Another manager's leftovers are not the observer's to drop.
	if _, stale, _ := RecordedEntries(inv, FieldManagerHookStatus); stale {
		t.Fatal("stale for a manager that owns no entry")
	}
	inv.ManagedFields[0].FieldsV1.SetRawString("{not json")
	if _, _, err := RecordedEntries(inv, FieldManagerInventory); err == nil {
		t.Fatal("unparsable managedFields accepted")
	}
}
