package healthloop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// TestOwedRecordRidesInTheEdgeWrite: the record of an owed sync request
// costs no write of its own. A pass with an edge writes the inventory once, the entries
// apply, which carries the record, and sends one request; the paid record stays, and
// neither this process nor the next one pays it again or writes for it.
func TestOwedRecordRidesInTheEdgeWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	w := newFaultyWriter(nil)
	f.h.Writer = w
	f.unpaidPass()                                 // stop after the writes, to see the record
	delete(w.writes, inventory.FieldManagerHealth) // the condition, on the Release
	if got := w.writes; len(got) != 1 || got[inventory.FieldManagerInventory] != 1 {
		t.Fatalf("inventory writes before the request = %v, want only the entries apply", got)
	}
	if f.getInventory().Annotations[inventory.AnnotationSyncOwed] == "" {
		t.Fatal("the entries apply did not record the owed sync request")
	}
	f.pass()
	f.pass()
	f.h = f.newController()
	f.h.Writer = w
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want 1", n)
	}
	delete(w.writes, inventory.FieldManagerHealth)
	if got := w.writes; len(got) != 1 || got[inventory.FieldManagerInventory] != 1 {
		t.Fatalf("inventory writes = %v, want the one entries apply", got)
	}
}

// TestOwedRecordReadsTheAPIServer: the baseline of a record is the Release's sync
// annotation as the API server has it, not as a lagging cache shows it. A cache that has
// not seen the last request yet would make that request look like the payment of the
// new debt, and a process killed before paying would lose it.
func TestOwedRecordReadsTheAPIServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.h.Reader = staleReader{Reader: env.Client, stale: f.getRelease()} // before any request
	f.h.LiveReader = env.Client
	f.pass()
	f.configMap("a", "false")
	f.pass()
	f.configMap("a", "true") // the wave completes again: a new debt
	f.unpaidPass()
	f.h = f.newController()
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("sync requests = %d, want 2 (the debt of the second wave was lost)", n)
	}
}

// TestOwedRecordOfAnotherProcessAgainstALaggingCache (found by test/faults, handover):
// a new leader's Release cache can lag behind its inventory cache, which shows the
// record of the last leader's unpaid debt. The cached Release then holds an older sync
// annotation than the record's baseline: that differs from the baseline, but it is no
// later sync request, and reading it as the payment lost the debt (the wave completed
// and nobody woke the controller-manager). A record this process does not know is
// judged paid only from the API server.
func TestOwedRecordOfAnotherProcessAgainstALaggingCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	before := f.getRelease() // no sync annotation yet
	f.pass()                 // the first edge, paid: the annotation moves
	f.configMap("a", "false")
	f.pass()
	f.configMap("a", "true") // the wave completes again: a new debt
	f.unpaidPass()           // recorded with the moved annotation as its baseline; killed
	f.h = f.newController()  // the new leader: nothing in memory
	f.h.Reader = staleReader{Reader: env.Client, stale: before}
	f.h.LiveReader = env.Client
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("sync requests = %d, want 2 (the unpaid debt read as paid from a lagging cache)", n)
	}
}

// TestOwedRecordOfALeaderKilledBeforeConfirming (found by test/faults, handover, in CI):
// a leader whose Release cache lagged behind a sync request (its own payment of the
// edge before, served milliseconds earlier) recorded the next edge with the older
// annotation as the baseline, and was killed before it confirmed that baseline against
// the API server. The next leader saw an annotation that differs from the baseline and
// is a later time than it, but was served before the record: reading it as the payment
// lost the wave's sync request. A record this process did not write is paid only by a
// request later than the record itself.
func TestOwedRecordOfALeaderKilledBeforeConfirming(t *testing.T) {
	t.Parallel()
	for name, baseline := range map[string]string{"no request": "", "an older request": t0.Format(time.RFC3339Nano)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.edge("entries")
			f.pass() // the first edge, paid
			served, err := time.Parse(time.RFC3339Nano, f.getRelease().Annotations[v1alpha1.SyncRequestedAtAnnotation])
			must(t, err)
			// The record the killed leader wrote a moment after that request, with the
			// baseline its lagging cache showed.
			f.setOwedRecord(served.Add(time.Millisecond).Format(time.RFC3339Nano) + owedBaseline + baseline)
			f.h = f.newController()
			f.pass()
			if n := f.api.syncs.Load(); n != 2 {
				t.Fatalf("sync requests = %d, want 2 (the killed leader's debt read as paid by the request before it)", n)
			}
			f.pass()
			f.h = f.newController()
			gets := &countingReader{Reader: env.Client}
			f.h.LiveReader = gets
			f.pass()
			f.wantSyncsWithoutLiveReads(gets, 2, "a paid debt was paid again", "the payment is later than the record")
		})
	}
}

// TestOwedRecordBaselineIsTheLastOwnRequest: the pass of an edge that comes right after
// a paid one reads a Release cache that does not show that request yet. The record takes
// the annotation this process's request set (the answer of /sync) as its baseline, not
// the cache's older one: a process killed before confirming leaves a record that no
// earlier request can pay, and confirm has nothing to correct (no replacing patch).
func TestOwedRecordBaselineIsTheLastOwnRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.h.Reader = staleReader{Reader: env.Client, stale: f.getRelease()} // never shows a request
	f.h.LiveReader = env.Client
	f.pass()
	served := f.getRelease().Annotations[v1alpha1.SyncRequestedAtAnnotation]
	f.configMap("a", "false")
	f.pass()
	f.configMap("a", "true") // the wave completes again: a new debt
	w := newFaultyWriter(nil)
	f.h.Writer = w
	f.unpaidPass()
	if _, baseline, _ := strings.Cut(f.getInventory().Annotations[inventory.AnnotationSyncOwed], owedBaseline); baseline != served {
		t.Errorf("the record's baseline = %q, want %q, the annotation of this process's last request", baseline, served)
	}
	if n := w.writes[inventory.FieldManagerSyncOwed]; n != 0 {
		t.Errorf("patches of the record = %d, want 0 (its baseline needed no correction)", n)
	}
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("sync requests = %d, want 2", n)
	}
}

// TestPaidRecordOfAnotherProcessCostsNoRead: a paid record stays in the inventory of a
// steady Release until a later apply drops it, so after a restart or a handover nearly
// every Release shows one that the new process did not write. Telling it paid must not
// cost a GET per Release: the sync annotation is the time of the request, and a later
// time than the baseline (or any time, against no baseline annotation) is a later
// request. Only an annotation that is no such time asks the API server.
func TestPaidRecordOfAnotherProcessCostsNoRead(t *testing.T) {
	t.Parallel()
	for _, edges := range []int{1, 2} { // the record's baseline: none, then a request's time
		t.Run(fmt.Sprint(edges), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.edge("entries")
			f.pass()
			if edges == 2 {
				f.configMap("a", "false")
				f.pass()
				f.configMap("a", "true")
				f.pass()
			}
			if f.getInventory().Annotations[inventory.AnnotationSyncOwed] == "" {
				t.Fatal("no paid record left in the inventory: the test tests nothing")
			}
			f.h = f.newController()
			gets := &countingReader{Reader: env.Client}
			f.h.LiveReader = gets
			f.pass()
			f.pass()
			if n := f.api.syncs.Load(); n != int32(edges) {
				t.Errorf("sync requests = %d, want %d (a paid debt was paid again)", n, edges)
			}
			if n := gets.n.Load(); n != 0 {
				t.Errorf("live reads of the Release = %d, want 0", n)
			}
		})
	}
}

// countingReader counts the Gets of a reader.
type countingReader struct {
	client.Reader
	n atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.n.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestOlderRecordIsRemovedOnce: a record without a baseline (an older observer's) reads
// as unpaid: it is paid once and removed; when the removal fails, the retry removes it
// without sending the request again. The removal has no resourceVersion precondition, so
// another writer of the inventory does not make it conflict.
func TestOlderRecordIsRemovedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.pass()
	f.setOwedRecord(t0.Format(time.RFC3339))
	f.h = f.newController()
	f.h.Writer = newFaultyWriter(map[string]int{inventory.FieldManagerSyncOwed: 1}) // the removal
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("a failed removal of the record did not fail the pass")
	}
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("sync requests = %d, want 2", n)
	}
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("the paid request was sent again (%d)", n)
	}
	if _, ok := f.getInventory().Annotations[inventory.AnnotationSyncOwed]; ok {
		t.Fatal("the record of the paid request stayed")
	}
}

// edge creates a Release whose first pass persists an edge with the write "entries" (a
// completed wave) or "hooks" (a finished hook).
func (f *fixture) edge(write string) {
	f.t.Helper()
	if write == "entries" {
		f.oneConfigMap("true")
		return
	}
	f.release(nil, 0)
	f.preHook(t0.Add(-time.Minute), complete("done")...)
}

// unpaidPass runs a pass whose sync request fails: the process dies before paying.
func (f *fixture) unpaidPass() {
	f.t.Helper()
	f.api.fail.Store(true)
	defer f.api.fail.Store(false)
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		f.t.Fatal("a failed sync request did not fail the pass")
	}
}

// setOwedRecord sets the inventory's record of an owed sync request as another writer.
func (f *fixture) setOwedRecord(value string) {
	f.t.Helper()
	f.setAnnotation(f.getInventory(), inventory.AnnotationSyncOwed, value)
}

// syncAnnotation sets the Release's sync annotation as the /sync endpoint would.
func (f *fixture) syncAnnotation(value string) {
	f.t.Helper()
	f.setAnnotation(f.getRelease(), v1alpha1.SyncRequestedAtAnnotation, value)
}

// setAnnotation replaces obj's annotations with key: value, as another writer would
// (a merge patch).
func (f *fixture) setAnnotation(obj client.Object, key, value string) {
	f.t.Helper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	obj.SetAnnotations(map[string]string{key: value})
	must(f.t, env.Client.Patch(f.ctx, obj, patch))
}

// TestUnpaidRecordSurvivesLaterApplies: the record is owned by the field
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
			f.unpaidPass()
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
			f.unpaidPass() // the process dies before paying
			after := f.getInventory()
			if after.ResourceVersion == inv.ResourceVersion {
				t.Fatalf("precondition: the second pass did not write the %s", write)
			}
			if got := after.Annotations[inventory.AnnotationSyncOwed]; got != record {
				t.Fatalf("after a later %s apply the record is %q, want %q", write, got, record)
			}
			f.h = f.newController() // a new process: nothing in memory
			f.pass()
			f.h = f.newController()
			f.pass()
			if n := f.api.syncs.Load(); n != 1 {
				t.Fatalf("sync requests after two restarts = %d, want 1", n)
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
	inv := f.getInventory()
	f.setOwedRecord("newer")
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

// TestOwedSyncSurvivesRestart (found by test/faults, kill): an observer that dies after
// persisting an edge's state (a completed wave, a finished hook) and before its sync
// request succeeded leaves the debt in the inventory; the next process pays it, once,
// and the process after that reads the record as paid.
func TestOwedSyncSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, write := range []string{"entries", "hooks"} { // a completed wave, a finished hook
		t.Run(write, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.edge(write)
			f.unpaidPass()
			if f.getInventory().Annotations[inventory.AnnotationSyncOwed] == "" {
				t.Fatal("the owed sync request is not recorded in the inventory")
			}
			f.h = f.newController() // a new process: nothing in memory
			f.pass()
			if n := f.api.syncs.Load(); n != 1 {
				t.Fatalf("sync requests after the restart = %d, want 1", n)
			}
			inv := f.getInventory()
			f.pass()
			f.h = f.newController()
			f.pass()
			if f.api.syncs.Load() != 1 || f.getInventory().ResourceVersion != inv.ResourceVersion {
				t.Fatal("a steady pass after paying the debt sent a request or wrote the inventory")
			}
		})
	}
}

// TestOwedRecordOfAHugeSyncAnnotation: someone else wrote a garbage sync annotation on
// the Release, as large as the API server lets a Release's annotations be (256 KiB).
// The record of an owed sync request must still fit in the inventory's annotations:
// it copied the whole value, so every apply of the edge was refused as too long, and
// the Release's state was never written again (nor the request sent).
func TestOwedRecordOfAHugeSyncAnnotation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.syncAnnotation(strings.Repeat("x", 256<<10-len(v1alpha1.SyncRequestedAtAnnotation)-10))
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want 1", n)
	}
	if rec := f.getInventory().Annotations[inventory.AnnotationSyncOwed]; len(rec) > 1024 {
		t.Errorf("the record holds %d bytes, want a bounded baseline", len(rec))
	}
}

// TestForgedOwedRecords: records of an owed sync request written by someone else —
// empty, without a baseline, huge, without a time, or with the Release's current
// annotation as their baseline — cost at most one sync request each, never an endless
// series of requests, and never a failed pass.
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
		{"paid baseline", func(*fixture) string { return t0.Format(time.RFC3339Nano) + owedBaseline + "an older request" }, 0},
		{"no time", func(*fixture) string { return "then" + owedBaseline + "an older request" }, 1},
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

// TestOwedRecordBaselineCostsNoRead: a pass that persists an edge and writes the
// Healthy condition takes the record's baseline from its cached Release and confirms
// it with the condition apply's answer: no GET of the Release. The baseline is the sync
// annotation as it was before the pass's own request.
func TestOwedRecordBaselineCostsNoRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	before := t0.Add(-time.Hour).Format(time.RFC3339Nano) // an earlier request's
	f.syncAnnotation(before)
	gets := &countingReader{Reader: env.Client}
	f.h.LiveReader = gets
	f.unpaidPass()
	if _, baseline, _ := strings.Cut(f.getInventory().Annotations[inventory.AnnotationSyncOwed], owedBaseline); baseline != before {
		t.Fatalf("the record's baseline = %q, want the annotation before the pass, %q", baseline, before)
	}
	f.pass()
	f.configMap("a", "false")
	f.pass()
	f.configMap("a", "true") // a second edge, after a request of this process's own
	f.pass()
	f.wantSyncsWithoutLiveReads(gets, 2, "one per edge", "the condition apply answers with it")
}

// wantSyncsWithoutLiveReads fails the test unless f's convoy-api served want sync
// requests and gets counted no GET of the Release; the reasons go in the messages.
func (f *fixture) wantSyncsWithoutLiveReads(gets *countingReader, want int32, syncsWhy, readsWhy string) {
	f.t.Helper()
	if n := f.api.syncs.Load(); n != want {
		f.t.Errorf("sync requests = %d, want %d (%s)", n, want, syncsWhy)
	}
	if n := gets.n.Load(); n != 0 {
		f.t.Errorf("live reads of the Release = %d, want 0 (%s)", n, readsWhy)
	}
}

// TestOwedRecordConfirmedAfterAHookEdge: a finished hook whose pass writes no condition
// confirms the cached baseline with one GET after the write. A cache that lagged behind
// another client's sync request recorded an older annotation; the record is applied
// again (by the hooks apply that carried it) with the annotation read after the write,
// so a process killed before its own request does not take that earlier request for the
// payment.
func TestOwedRecordConfirmedAfterAHookEdge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.pass() // NotConfigured: the condition is written now, not with the hook's edge
	stale := f.getRelease()
	served := t0.Add(-time.Minute).Format(time.RFC3339Nano) // another client's request
	f.syncAnnotation(served)
	f.preHook(t0.Add(-time.Minute), complete("done")...)
	gets := &countingReader{Reader: env.Client}
	f.h.Reader = staleReader{Reader: env.Client, stale: stale}
	f.h.LiveReader = gets
	f.unpaidPass()
	if n := gets.n.Load(); n != 1 {
		t.Errorf("live reads of the Release = %d, want 1 (the confirmation)", n)
	}
	if _, baseline, _ := strings.Cut(f.getInventory().Annotations[inventory.AnnotationSyncOwed], owedBaseline); baseline != served {
		t.Fatalf("the record's baseline = %q, want the annotation after the write, %q", baseline, served)
	}
	f.h = f.newController() // the process died before its request
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests after the restart = %d, want 1 (the earlier request read as the payment)", n)
	}
}

// TestReplacedOwedRecordStaysOwn: after confirm replaced the value of this process's
// record, a pass whose inventory cache still shows the old value, and whose Release cache
// shows the request that the replacement was about, pays the debt: the old value is this
// process's own record, not another process's that the annotation would read as paid.
func TestReplacedOwedRecordStaysOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.pass()
	f.hiddenRequest()
	f.preHook(t0.Add(-time.Minute), complete("done")...)
	f.unpaidPass() // the record replaced; the request failed
	inv := f.getInventory()
	at, baseline, _ := strings.Cut(inv.Annotations[inventory.AnnotationSyncOwed], owedBaseline)
	if baseline == "" {
		t.Fatal("the record was not replaced: the test tests nothing")
	}
	inv.Annotations[inventory.AnnotationSyncOwed] = at + owedBaseline // the value before the replacement
	f.h.Reader = staleReader{Reader: env.Client, stale: inv}
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want 1 (the replaced record read as another's, paid)", n)
	}
}

// TestOwedRecordConfirmedWhenALaterWriteFails: the record landed with the entries apply,
// the condition apply failed. The pass still confirms the record's baseline (a GET)
// before it returns, so a process killed before the retry does not take a request that
// the cache hid for the payment.
func TestOwedRecordConfirmedWhenALaterWriteFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	served := f.hiddenRequest()
	f.h.Writer = newFaultyWriter(map[string]int{inventory.FieldManagerHealth: 1}) // the condition
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("a failed condition apply did not fail the pass")
	}
	if _, baseline, _ := strings.Cut(f.getInventory().Annotations[inventory.AnnotationSyncOwed], owedBaseline); baseline != served {
		t.Fatalf("the record's baseline = %q, want the annotation after the write, %q", baseline, served)
	}
	f.h = f.newController()
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests after the restart = %d, want 1", n)
	}
}

// hiddenRequest serves another client's sync request (served, a time before t0) that
// the loop's Release cache does not show yet: the Reader keeps the Release as it was
// before it, the LiveReader reads the API server.
func (f *fixture) hiddenRequest() (served string) {
	f.t.Helper()
	stale := f.getRelease()
	served = t0.Add(-time.Minute).Format(time.RFC3339Nano)
	f.syncAnnotation(served)
	f.h.Reader = staleReader{Reader: env.Client, stale: stale}
	f.h.LiveReader = env.Client
	return served
}

// lostAnswerWriter makes the apply of owner go out, then answers it with an error once:
// the write landed and its answer was lost.
type lostAnswerWriter struct {
	client.Client
	owner string
	lost  atomic.Int32
}

func (w *lostAnswerWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	err := w.Client.Apply(ctx, obj, opts...)
	if err == nil && applyOwner(opts) == w.owner && w.lost.Add(-1) >= 0 {
		return errors.New("injected: context deadline exceeded (the apply landed)")
	}
	return err
}

// TestOwedRecordConfirmedAfterALostAnswer (from an attack): the entries apply carrying a
// new record landed, but its answer was lost, and the retry's apply changes nothing. The
// record is confirmed when the inventory cache shows it, so a handover does not take a
// request that the Release cache hid for the payment.
func TestOwedRecordConfirmedAfterALostAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.hiddenRequest()
	w := &lostAnswerWriter{Client: env.Client, owner: inventory.FieldManagerInventory}
	w.lost.Store(1)
	f.h.Writer = w
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("the lost answer did not fail the pass")
	}
	f.unpaidPass()          // the retry; the sync endpoint is down
	f.h = f.newController() // a handover
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests = %d, want 1 (a request served before the write read as the payment)", n)
	}
}

// TestUnpaidOwnRecordSurvivesAnOlderOneInTheCache (from an attack): while this process
// owes a request (its record's confirmation failed), an inventory cache that lags shows
// its older, paid record. That older record must not replace the debt in memory: the
// debt was lost in-process once the cache caught up.
func TestUnpaidOwnRecordSurvivesAnOlderOneInTheCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.pass() // the first edge, paid; its record stays
	staleInv := f.getInventory()
	f.configMap("a", "false")
	f.pass()
	staleRel := f.getRelease()
	f.syncAnnotation(time.Now().UTC().Add(time.Second).Format(time.RFC3339Nano)) // another client's request
	f.configMap("a", "true")                                                     // the wave completes again
	f.h.Reader = staleReader{Reader: env.Client, stale: staleRel}
	f.h.LiveReader = env.Client
	f.h.Writer = newFaultyWriter(map[string]int{inventory.FieldManagerSyncOwed: 1}) // the replacement
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("the failed replacement did not fail the pass")
	}
	f.h.Reader = staleReader{Reader: staleReader{Reader: env.Client, stale: staleRel}, stale: staleInv}
	_, _ = f.h.syncHandler(f.ctx, f.key) // the retry, on caches that lag
	f.h.Reader = env.Client
	f.pass()
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("sync requests = %d, want 2 (the second edge's debt was lost)", n)
	}
}

// TestReplacedRecordIsRemovedOncePaid (from an attack): the patch that replaced a
// record's value owns the annotation alone, so no later apply drops it; once paid, it is
// removed.
func TestReplacedRecordIsRemovedOncePaid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.edge("entries")
	f.hiddenRequest()
	f.pass() // replaced and paid
	f.h.Reader = env.Client
	f.configMap("a", "false")
	f.pass()
	if rec := f.getInventory().Annotations[inventory.AnnotationSyncOwed]; rec != "" {
		t.Errorf("the paid, replaced record stayed: %q", rec)
	}
	if n := f.api.syncs.Load(); n != 1 {
		t.Errorf("sync requests = %d, want 1", n)
	}
}
