package clustercache

import (
	"slices"
	"testing"
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
