package clustercache

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRefusedTypesAreForgotten: the cache remembers each resource type whose list/watch
// was refused (forbidden or not served) to read it with GETs; a type that nothing records
// any more is forgotten. An inventory whose entries name made-up resources ("x0", "x1",
// …, each a 404 of the target) that the tenant changes over time keeps one remembered
// type, not one per name ever seen.
func TestRefusedTypesAreForgotten(t *testing.T) {
	ctx := context.Background()
	cache := New(Options{Local: env.Config, Watch: true, UnsafeReadAsObserver: true})
	defer cache.Stop()
	cluster := localCluster("grow")
	const n = 40
	for i := range n {
		ref := TargetRef{GVR: schema.GroupVersionResource{Group: "made.up", Version: "v1", Resource: fmt.Sprintf("x%d", i)},
			Kind: "X", Namespace: "default", Name: "a"}
		cache.Track("ns/rel", cluster, []TargetRef{ref}) // the inventory now names only this type
		r, err := cache.GetReader(ctx, cluster)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = r.Get(ctx, ref.GVR, ref.Namespace, ref.Name)
		tw := cache.clients["ns/grow"].watches
		eventually(t, "the fallback of "+ref.GVR.Resource, func() bool {
			tw.mu.Lock()
			defer tw.mu.Unlock()
			_, ok := tw.fallback[ref.GVR]
			return ok
		})
	}
	tw := cache.clients["ns/grow"].watches
	tw.mu.Lock()
	fb := len(tw.fallback)
	tw.mu.Unlock()
	t.Logf("types the index names now: %d; fallback entries kept: %d", len(cache.index.scopes["ns/grow"]), fb)
	if fb > 1 {
		t.Errorf("the cache remembers %d refused types while the inventory names 1", fb)
	}
}
