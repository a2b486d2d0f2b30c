package server_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	syncapiserver "github.com/kumodo/convoy-observer/internal/syncapi/server"
)

func TestHealthResultPure(t *testing.T) {
	t.Parallel()
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rel"}}
	if _, err := syncapiserver.BuildHealthResult(nil, nil); err == nil {
		t.Error("BuildHealthResult(nil, nil) succeeded")
	}

	got, err := syncapiserver.BuildHealthResult(rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Release != "ns/rel" || !got.RenderCurrent || got.Entries == nil || got.Hooks == nil || got.Summary != (v1alpha1.HealthSummary{}) {
		t.Errorf("no inventory: %+v", got)
	}

	// Without managedFields nothing is recorded by the controller-manager: an inventory
	// that only a stale observer write keeps alive shows nothing.
	inv := &v1alpha1.ReleaseInventory{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rel"},
		Entries:    []v1alpha1.InventoryEntry{{Kind: "ConfigMap", Namespace: "ns", Name: "a", State: v1alpha1.StateHealthy}},
		Hooks:      []v1alpha1.HookEntry{{Name: "pre"}},
	}
	if got, err = syncapiserver.BuildHealthResult(rel, inv); err != nil || len(got.Entries) != 0 || len(got.Hooks) != 0 || got.Summary.Total != 0 {
		t.Errorf("unrecorded entries: %+v, %v", got, err)
	}

	inv.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x", FieldsV1: metav1.NewFieldsV1("not json")}}
	if _, err := syncapiserver.BuildHealthResult(rel, inv); err == nil {
		t.Error("unparsable managedFields gave no error")
	}
}
