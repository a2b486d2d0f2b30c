package clustercache

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestIndexFollowsTrack: the index maps each object to the Releases that read it and
// counts each type's namespaces per cluster; a Release that moves to another cluster
// or reads nothing any more leaves no trace, and one that reads what it read changes
// nothing.
func TestIndexFollowsTrack(t *testing.T) {
	x := newIndex()
	a := cmRef("ns1", "a")
	shared := cmRef("ns2", "shared")
	if got := x.set("r1", "c/one", []TargetRef{a, shared}); !slices.Equal(got, []string{"c/one"}) {
		t.Fatalf("changed clusters = %v", got)
	}
	x.set("r2", "c/one", []TargetRef{shared})
	// A Release that reads what it read changes nothing (a steady pass).
	if got := x.set("r2", "c/one", []TargetRef{cmRef("ns2", "shared")}); len(got) != 0 {
		t.Fatalf("the same refs again: changed clusters = %v, want none", got)
	}
	// The same object twice counts twice in its namespace, and goes with its Release.
	x.set("r3", "c/one", []TargetRef{a, a})
	if got := x.scopes["c/one"][gvrConfigMaps]; got["ns1"] != 3 {
		t.Fatalf("scopes with a repeated ref = %v", got)
	}
	x.set("r3", "c/one", nil)
	if got := x.readers(shared.key("c/one")); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("readers of shared = %v", got)
	}
	if got := x.scopes["c/one"][gvrConfigMaps]; got["ns1"] != 1 || got["ns2"] != 2 {
		t.Fatalf("scopes = %v", got)
	}
	// r1 moves to another cluster: both clusters' scopes change.
	if got := x.set("r1", "c/two", []TargetRef{a}); !slices.Equal(got, []string{"c/one", "c/two"}) {
		t.Fatalf("changed clusters = %v", got)
	}
	if got := x.readers(a.key("c/one")); len(got) != 0 {
		t.Fatalf("readers of a on the old cluster = %v", got)
	}
	if got := x.readers(a.key("c/two")); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("readers of a on the new cluster = %v", got)
	}
	if got := x.scopes["c/one"][gvrConfigMaps]; len(got) != 1 || got["ns2"] != 1 {
		t.Fatalf("scopes of the old cluster = %v", got)
	}
	x.set("r1", "", nil)
	x.set("r2", "c/one", nil)
	if len(x.releases) != 0 || len(x.objects) != 0 || len(x.scopes) != 0 {
		t.Fatalf("index after every Release left: %+v", x)
	}
}

// TestIndexMatchesItsModel: after any sequence of Tracks (Releases moving between
// clusters, reading repeated, shared or no objects, the same refs again), the index is
// what a recount of every Release's last refs gives: the readers of each object, and
// each cluster's refs per resource and namespace.
func TestIndexMatchesItsModel(t *testing.T) {
	small := []TargetRef{cmRef("ns1", "a"), cmRef("ns1", "b"), cmRef("ns2", "a"),
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Kind: "Secret", Namespace: "ns1", Name: "a"},
		{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1beta2", Resource: "deployments"}, Kind: "Deployment", Namespace: "ns1", Name: "a"},
		{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespace: "ns1", Name: "a"}}
	var large []TargetRef // more scopes than trackedOf scans before it keeps a map
	for i := range 40 {
		large = append(large, cmRef(fmt.Sprintf("ns%d", i%20), fmt.Sprintf("o%d", i%3)))
	}
	indexMatchesItsModel(t, small, 4)
	indexMatchesItsModel(t, large, 30)
}

func indexMatchesItsModel(t *testing.T, pool []TargetRef, most int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	clusters := []string{"c/one", "c/two"}
	x := newIndex()
	model := map[string]string{} // release → its cluster
	modelRefs := map[string][]TargetRef{}
	for step := range 2000 {
		release := fmt.Sprintf("r%d", rng.IntN(5))
		var refs []TargetRef
		if rng.IntN(5) > 0 {
			for range rng.IntN(most) {
				refs = append(refs, pool[rng.IntN(len(pool))])
			}
		}
		if old, ok := modelRefs[release]; ok && rng.IntN(3) == 0 {
			refs = old // what it read, as a steady pass tracks it
		}
		cluster := clusters[rng.IntN(len(clusters))]
		x.set(release, cluster, refs)
		if len(refs) == 0 {
			delete(model, release)
			delete(modelRefs, release)
		} else {
			model[release] = cluster
			modelRefs[release] = refs
		}
		objects := map[string][]string{}
		scopes := map[string]map[schema.GroupVersionResource]map[string]int{}
		for r, c := range model {
			for _, ref := range modelRefs[r] {
				k := ref.key(c)
				if !slices.Contains(objects[k], r) {
					objects[k] = append(objects[k], r)
				}
				if scopes[c] == nil {
					scopes[c] = map[schema.GroupVersionResource]map[string]int{}
				}
				if scopes[c][ref.GVR] == nil {
					scopes[c][ref.GVR] = map[string]int{}
				}
				scopes[c][ref.GVR][ref.Namespace]++
			}
		}
		if len(objects) != len(x.objects) {
			t.Fatalf("step %d: %d objects indexed, want %d", step, len(x.objects), len(objects))
		}
		for k, want := range objects {
			slices.Sort(want)
			if got := x.readers(k); !slices.Equal(got, want) {
				t.Fatalf("step %d: readers of %q = %v, want %v", step, k, got, want)
			}
		}
		if !reflect.DeepEqual(x.scopes, scopes) {
			t.Fatalf("step %d: scopes = %v, want %v", step, x.scopes, scopes)
		}
	}
}

// BenchmarkSteadyTrack: the Track of a steady pass (the same refs again), for a Release
// that records 10 objects and one that records 10,000 in as many namespaces; the second
// must cost about a thousand times the first, not more (trackedOf is linear).
func BenchmarkSteadyTrack(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			refs := make([]TargetRef, n)
			for i := range refs {
				refs[i] = cmRef(fmt.Sprintf("tenant-%05d", i), "cfg")
			}
			c := New(Options{})
			defer c.Stop()
			cluster := localCluster("steady")
			c.Track("ns/r", cluster, refs)
			b.ReportAllocs()
			for b.Loop() {
				c.Track("ns/r", cluster, refs)
			}
		})
	}
}
