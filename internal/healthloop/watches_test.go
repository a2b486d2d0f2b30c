package healthloop

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

func TestReleaseChanged(t *testing.T) {
	t.Parallel()
	old := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1", Generation: 1, Labels: map[string]string{"a": "b"}}}
	cases := []struct {
		name   string
		mutate func(r *v1alpha1.Release)
		want   bool
	}{
		{"resync", func(r *v1alpha1.Release) {}, true},
		{"status write", func(r *v1alpha1.Release) {
			r.ResourceVersion = "2"
			r.Status.Conditions = []metav1.Condition{{Type: "Healthy"}}
		}, false},
		{"sync annotation", func(r *v1alpha1.Release) {
			r.ResourceVersion = "2"
			r.Annotations = map[string]string{v1alpha1.SyncRequestedAtAnnotation: "now"}
		}, false},
		{"generation", func(r *v1alpha1.Release) { r.ResourceVersion = "2"; r.Generation = 2 }, true},
		{"labels", func(r *v1alpha1.Release) { r.ResourceVersion = "2"; r.Labels = map[string]string{"a": "c"} }, true},
		{"deletion", func(r *v1alpha1.Release) {
			r.ResourceVersion = "2"
			now := metav1.NewTime(time.Now())
			r.DeletionTimestamp = &now
		}, true},
	}
	for _, tc := range cases {
		cur := old.DeepCopy()
		tc.mutate(cur)
		if got := ReleaseChanged(old, cur); got != tc.want {
			t.Errorf("%s: ReleaseChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestInventoryChanged(t *testing.T) {
	t.Parallel()
	wave := int32(1)
	old := &v1alpha1.ReleaseInventory{
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"},
		Entries:    []v1alpha1.InventoryEntry{{Kind: "ConfigMap", Namespace: "d", Name: "a", Version: "v1", Resource: "configmaps", Wave: &wave, RenderRef: "r1"}},
		Hooks:      []v1alpha1.HookEntry{{Name: "h", WorkloadKind: "Job", WorkloadName: "j", CreatedAt: &metav1.Time{Time: time.Unix(100, 0)}}},
	}
	cases := []struct {
		name   string
		mutate func(i *v1alpha1.ReleaseInventory)
		want   bool
	}{
		{"resync", func(i *v1alpha1.ReleaseInventory) {}, true},
		{"observer entry fields", func(i *v1alpha1.ReleaseInventory) {
			i.Entries[0].State, i.Entries[0].Message, i.Entries[0].AssessedRenderRef = "Healthy", "m", "r1"
			i.Entries[0].FirstUnhealthy = &metav1.Time{Time: time.Now()}
		}, false},
		{"observer hook fields", func(i *v1alpha1.ReleaseInventory) {
			i.Hooks[0].State, i.Hooks[0].Message = "Succeeded", "done"
			i.Hooks[0].FinishedAt = &metav1.Time{Time: time.Now()}
		}, false},
		{"entry keys", func(i *v1alpha1.ReleaseInventory) {
			i.Entries = append(i.Entries, v1alpha1.InventoryEntry{Kind: "ConfigMap", Namespace: "d", Name: "b"})
		}, true},
		{"entry removed", func(i *v1alpha1.ReleaseInventory) { i.Entries = nil }, true},
		{"version", func(i *v1alpha1.ReleaseInventory) { i.Entries[0].Version = "v2" }, true},
		{"resource", func(i *v1alpha1.ReleaseInventory) { i.Entries[0].Resource = "x" }, true},
		{"wave", func(i *v1alpha1.ReleaseInventory) { w := int32(2); i.Entries[0].Wave = &w }, true},
		{"renderRef", func(i *v1alpha1.ReleaseInventory) { i.Entries[0].RenderRef = "r2" }, true},
		{"hook re-armed", func(i *v1alpha1.ReleaseInventory) { i.Hooks[0].CreatedAt = &metav1.Time{Time: time.Unix(200, 0)} }, true},
		{"hook workload", func(i *v1alpha1.ReleaseInventory) { i.Hooks[0].WorkloadName = "j2" }, true},
		{"hook timeout", func(i *v1alpha1.ReleaseInventory) { i.Hooks[0].Timeout = "1m" }, true},
		{"hook added", func(i *v1alpha1.ReleaseInventory) { i.Hooks = append(i.Hooks, v1alpha1.HookEntry{Name: "h2"}) }, true},
	}
	for _, tc := range cases {
		cur := old.DeepCopy()
		cur.ResourceVersion = "2"
		if tc.name == "resync" {
			cur.ResourceVersion = "1"
		}
		tc.mutate(cur)
		if got := InventoryChanged(old, cur); got != tc.want {
			t.Errorf("%s: InventoryChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestShardGate(t *testing.T) {
	t.Parallel()
	g := NewShardGate(nil)
	if !g.Owns("") || g.Owns("a") {
		t.Fatal("no flags must own exactly the default shard")
	}
	g = NewShardGate([]string{"b", "a", "a"})
	if g.Owns("") || !g.Owns("a") || !g.Owns("b") {
		t.Fatal("explicit shards")
	}
	if got := g.Shards(); len(got) != 2 || got[0] != "a" {
		t.Fatalf("Shards() = %v", got)
	}
}

// TestPredicates: creates and deletes always add a key; updates only as ReleaseChanged,
// InventoryChanged and ClusterChanged say (CONTRACT §2).
func TestPredicates(t *testing.T) {
	t.Parallel()
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1", Generation: 1}}
	relStatus := rel.DeepCopy()
	relStatus.ResourceVersion = "2"
	relGen := relStatus.DeepCopy()
	relGen.Generation = 2
	inv := &v1alpha1.ReleaseInventory{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}
	invOwn := inv.DeepCopy()
	invOwn.ResourceVersion = "2"
	invOwn.Entries = []v1alpha1.InventoryEntry{{Name: "a", State: v1alpha1.StateHealthy}}
	invOwn.Entries[0].Kind = "ConfigMap"
	invCM := invOwn.DeepCopy()
	invCM.Entries[0].RenderRef = "r2"
	inv.Entries = []v1alpha1.InventoryEntry{{Name: "a"}}
	inv.Entries[0].Kind = "ConfigMap"
	cl := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1", Generation: 1}}
	clStatus := cl.DeepCopy()
	clStatus.ResourceVersion = "2"
	clSpec := clStatus.DeepCopy()
	clSpec.Generation, clSpec.Spec.Shard = 2, "b"
	cases := []struct {
		name     string
		p        predicate.Predicate
		old, cur client.Object
		want     bool
	}{
		{"Release status write", ReleasePredicate(), rel, relStatus, false},
		{"Release generation", ReleasePredicate(), rel, relGen, true},
		{"Release resync", ReleasePredicate(), rel, rel, true},
		{"inventory observer write", InventoryPredicate(), inv, invOwn, false},
		{"inventory renderRef", InventoryPredicate(), inv, invCM, true},
		{"Cluster status", ClusterPredicate(), cl, clStatus, false},
		{"Cluster spec", ClusterPredicate(), cl, clSpec, true},
	}
	for _, tc := range cases {
		if got := tc.p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur}); got != tc.want {
			t.Errorf("%s: update = %v, want %v", tc.name, got, tc.want)
		}
		if !tc.p.Create(event.CreateEvent{Object: tc.cur}) || !tc.p.Delete(event.DeleteEvent{Object: tc.cur}) {
			t.Errorf("%s: a create or delete was filtered out", tc.name)
		}
	}
}
