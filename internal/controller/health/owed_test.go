package health

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kumodo/convoy-observer/internal/inventory"
)

// TestOwedRecordRidesInTheEdgeWrite (issue #12): the record of an owed sync request
// costs no write of its own. A pass with an edge writes the inventory twice: the entries
// apply, which carries the record, and the removal of the record once the request got
// through; it sends one request.
func TestOwedRecordRidesInTheEdgeWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	w := newFaultyWriter(nil)
	f.h.Writer = w
	f.api.fail.Store(true) // stop after the writes, to see the record
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("a failed sync request did not fail the pass")
	}
	delete(w.writes, inventory.FieldManagerHealth) // the condition, on the Release
	if got := w.writes; len(got) != 1 || got[inventory.FieldManagerInventory] != 1 {
		t.Fatalf("inventory writes before the request = %v, want only the entries apply", got)
	}
	if f.getInventory().Annotations[inventory.AnnotationSyncOwed] == "" {
		t.Fatal("the entries apply did not record the owed sync request")
	}
	f.api.fail.Store(false)
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want 1", n)
	}
	delete(w.writes, inventory.FieldManagerHealth)
	if got := w.writes; got[inventory.FieldManagerInventory] != 1 || got[inventory.FieldManagerSyncOwed] != 1 || len(got) != 2 {
		t.Fatalf("inventory writes = %v, want one entries apply and one removal", got)
	}
	if _, ok := f.getInventory().Annotations[inventory.AnnotationSyncOwed]; ok {
		t.Fatal("the paid sync request is still recorded")
	}
}

// edge creates a Release whose first pass persists an edge with the write "entries" (a
// completed wave) or "hooks" (a finished hook).
func (f *fixture) edge(write string) {
	f.t.Helper()
	if write == "entries" {
		f.readyRelease(0, 0)
		f.configMap("a", "true")
		f.inventory(cm("a", 0, ""))
		return
	}
	f.release(nil, 0)
	f.job("migrate", complete("done")...)
	f.hooks(hook{name: "pre", kind: "Job", workload: "migrate", createdAt: t0.Add(-time.Minute)})
}

// TestUnpaidRecordSurvivesLaterApplies (issue #12): the record is owned by the field
// manager of the apply that carried it, and Server-Side Apply removes a field that its
// only owner stops sending. So every later apply of that manager carries the record
// while the debt is unpaid: an observer killed after such an apply still pays the debt.
func TestUnpaidRecordSurvivesLaterApplies(t *testing.T) {
	t.Parallel()
	for _, write := range []string{"entries", "hooks"} {
		t.Run(write, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.edge(write)
			f.api.fail.Store(true) // the requests fail until the process dies
			if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
				t.Fatal("a failed sync request did not fail the pass")
			}
			inv := f.getInventory()
			record := inv.Annotations[inventory.AnnotationSyncOwed]
			if record == "" {
				t.Fatal("the owed sync request is not recorded")
			}
			// A change that the same field manager writes, without an edge.
			if write == "entries" {
				f.configMap("a", "false")
			} else {
				f.job("other")
				f.hooks(hook{name: "pre", kind: "Job", workload: "migrate", createdAt: t0.Add(-time.Minute)},
					hook{name: "post", kind: "Job", workload: "other", createdAt: t0})
			}
			f.clock.Step(time.Second)
			if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
				t.Fatal("a failed sync request did not fail the pass")
			}
			after := f.getInventory()
			if after.ResourceVersion == inv.ResourceVersion {
				t.Fatalf("precondition: the second pass did not write the %s", write)
			}
			if got := after.Annotations[inventory.AnnotationSyncOwed]; got != record {
				t.Fatalf("after a later %s apply the record is %q, want %q", write, got, record)
			}
			f.api.fail.Store(false)
			f.h = f.newController() // a new process: nothing in memory
			f.pass()
			if n := f.api.syncs.Load(); n != 1 {
				t.Fatalf("sync requests after the restart = %d, want 1", n)
			}
			if _, ok := f.getInventory().Annotations[inventory.AnnotationSyncOwed]; ok {
				t.Fatal("the paid sync request is still recorded")
			}
		})
	}
}

// TestRemovalSparesANewerRecord: the removal of a paid record removes only the value
// that was paid; a newer record (written meanwhile by another writer, such as a replica
// that took over) stays.
func TestRemovalSparesANewerRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.pass()
	inv, newer := f.getInventory(), f.getInventory()
	patch := client.MergeFrom(newer.DeepCopy())
	newer.Annotations = map[string]string{inventory.AnnotationSyncOwed: "newer"}
	must(t, env.Client.Patch(f.ctx, newer, patch))
	if err := f.h.removeSyncOwed(f.ctx, inv, "older"); err != nil {
		t.Fatalf("removing a record that is no longer there: %v", err)
	}
	if got := f.getInventory().Annotations[inventory.AnnotationSyncOwed]; got != "newer" {
		t.Fatalf("record = %q after removing an older one, want the newer one kept", got)
	}
	if err := f.h.removeSyncOwed(f.ctx, inv, "newer"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.getInventory().Annotations[inventory.AnnotationSyncOwed]; ok {
		t.Fatal("the record was not removed")
	}
}
