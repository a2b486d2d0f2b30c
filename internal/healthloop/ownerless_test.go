package healthloop

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestUnownedEntriesAreSaid: an inventory whose entries no field manager owns (it was
// stored without managedFields, not with the controller-manager's Server-Side Apply) is
// no empty inventory: Healthy=Unknown says so and what to do, instead of Healthy 0/0.
func TestUnownedEntriesAreSaid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	inv := &v1alpha1.ReleaseInventory{ObjectMeta: metav1.ObjectMeta{Name: f.rel, Namespace: f.ns},
		Entries: []v1alpha1.InventoryEntry{{Kind: "ConfigMap", Namespace: f.ns, Name: "a", Version: "v1", Resource: "configmaps"}}}
	must(t, env.Client.Create(f.ctx, inv))
	// As the API server keeps an object without managedFields: reset them.
	must(t, env.Client.Patch(f.ctx, inv, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"managedFields":[{}]}}`))))
	if mf := f.getInventory().ManagedFields; len(mf) != 0 {
		t.Fatalf("precondition: managedFields = %v", mf)
	}
	f.pass()
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	for _, want := range []string{"1 entries", "no field manager", "Server-Side Apply"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not say %q", c.Message, want)
		}
	}
	// Applied as the controller-manager, the entry is assessed.
	f.inventory(cm("a", 0, ""))
	f.passHealthy()
	f.expectEntry("a", v1alpha1.StateHealthy, "")
}
