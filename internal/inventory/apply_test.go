package inventory

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestRecordLeavesTheObserverFieldsOut: the controller-manager's apply of an entry or a
// hook carries its keys and the fields it sets, never the observer's (state, message and
// the rest), so it never takes them over.
func TestRecordLeavesTheObserverFieldsOut(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := &v1alpha1.InventoryEntry{Group: "", Kind: "ConfigMap", Namespace: "ns", Name: "a", Version: "v1",
		Resource: "configmaps", Wave: ptr.To[int32](0), RenderRef: "r1",
		State: v1alpha1.StateHealthy, Message: "m", FirstUnhealthy: &now, AssessedRenderRef: "r0"}
	got, err := json.Marshal(RecordEntry(e))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"group":"","kind":"ConfigMap","namespace":"ns","name":"a","version":"v1","resource":"configmaps","wave":0,"renderRef":"r1"}`
	if string(got) != want {
		t.Fatalf("entry = %s, want %s", got, want)
	}
	h := &v1alpha1.HookEntry{Name: "pre", WorkloadKind: "Job", Namespace: "ns", WorkloadName: "j", CreatedAt: &now,
		State: v1alpha1.HookSucceeded, Message: "done", FinishedAt: &now}
	if got, err = json.Marshal(RecordHook(h)); err != nil {
		t.Fatal(err)
	}
	want = `{"name":"pre","workloadKind":"Job","namespace":"ns","workloadName":"j","createdAt":"2026-01-01T00:00:00Z"}`
	if string(got) != want {
		t.Fatalf("hook = %s, want %s", got, want)
	}
}
