package healthloop

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// TestOwedRecordOfAHugeSyncAnnotation: someone else wrote a garbage sync annotation on
// the Release, as large as the API server lets a Release's annotations be (256 KiB).
// The record of an owed sync request must still fit in the inventory's annotations:
// it copied the whole value, so every apply of the edge was refused as too long, and
// the Release's state was never written again (nor the request sent).
func TestOwedRecordOfAHugeSyncAnnotation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	rel := f.getRelease()
	patch := client.MergeFrom(rel.DeepCopy())
	rel.Annotations = map[string]string{v1alpha1.SyncRequestedAtAnnotation: strings.Repeat("x", 256<<10-len(v1alpha1.SyncRequestedAtAnnotation)-10)}
	must(t, env.Client.Patch(f.ctx, rel, patch))
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want 1", n)
	}
	if rec := f.getInventory().Annotations[inventory.AnnotationSyncOwed]; len(rec) > 1024 {
		t.Errorf("the record holds %d bytes, want a bounded baseline", len(rec))
	}
}

// TestForgedOwedRecords: records of an owed sync request written by someone else —
// empty, without a baseline, huge, or with the Release's current annotation as their
// baseline — cost at most one sync request each, never an endless series of requests,
// and never a failed pass.
func TestForgedOwedRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		value func(f *fixture) string
		syncs int32 // after the first, paid edge
	}{
		{"empty", func(*fixture) string { return "" }, 0},
		{"no baseline", func(*fixture) string { return "garbage" }, 1},
		{"huge, no baseline", func(*fixture) string { return strings.Repeat("g", 200<<10) }, 1},
		{"paid baseline", func(*fixture) string { return "then" + owedBaseline + "an older request" }, 0},
		{"current baseline", func(f *fixture) string {
			return "now" + owedBaseline + f.getRelease().Annotations[v1alpha1.SyncRequestedAtAnnotation]
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.edge("entries")
			f.pass()
			f.setOwedRecord(tc.value(f))
			for range 3 {
				f.pass()
			}
			if n := f.api.syncs.Load() - 1; n != tc.syncs {
				t.Errorf("sync requests after the forged record = %d, want %d", n, tc.syncs)
			}
		})
	}
}
