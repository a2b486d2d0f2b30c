package healthloop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// This file holds the whole life of an owed sync request (docs/design.md, "The owed
// sync record"): a pass with an edge arms it in memory and, when it persists the edge's
// state, records it in the inventory (openOwed); the pass's applies carry the record
// (owedSync.carry); after the writes, confirm checks its baseline against the API
// server, and settle sends the request (wake) and pays the record, or removes an older
// observer's (removeSyncOwed).
//
// The record of an owed sync request (inventory.AnnotationSyncOwed) costs no write of
// its own: it rides in the apply that persists the edge's state (the hooks or the
// entries apply, under that apply's field manager), so the state and the debt land
// together, and every later apply of the observer carries it while the debt is unpaid
// (Server-Side Apply would remove a field that its only owner stops sending). Its
// removal costs no write either: the record holds the Release's sync annotation
// (v1alpha1.SyncRequestedAtAnnotation, which the /sync endpoint sets, docs/design.md,
// "Objects and owners") as the Release showed it when the state was written, so any
// later sync request shows as a different annotation and the debt reads as paid, in
// this process or the next one. A paid record stays until the next apply of its field
// manager drops it (one whose value confirm replaced is removed once paid). An observer
// killed between the state write and the request finds an unpaid record and pays it (at
// least once); a steady Release, whose annotation has moved past the record, sends
// nothing.
//
// The baseline costs no read of its own either: it is the cached Release's annotation
// (or the one that this process's last request set, while the cache lags behind it),
// confirmed once the record landed (confirm, after the pass's writes, also when one of
// them failed) by the Release as the API server shows it then, which the pass's
// condition apply answers with (one GET when the pass wrote no condition). A cache that
// lagged behind a sync request served a moment before shows an older annotation; the
// confirmation sees the difference and replaces the record's value with one whose
// baseline is the annotation read after the write (one JSON patch), before the request
// is sent. A baseline read after the write may hold a request served after it too: that
// one then reads as unpaid and is sent again (at least once), never as a payment it was
// not. Until the confirmation (the milliseconds between the record's apply and the
// condition apply) the record holds the cache's baseline; the request that a lag hid did
// wake the controller-manager, and a change of an entry's state wakes it anyway
// (docs/design.md, "Wake the controller").
//
// A record without that baseline (written by an older observer) reads as unpaid; once
// paid, one JSON patch under the field manager convoy-sync-owed removes it, only if it
// still holds the value that was paid.

// owedState is what this process knows about the record of one Release.
type owedState struct {
	// value is the record this state is about (the annotation's value).
	value string
	// paid: the sync request owed for value was sent since it was recorded.
	paid bool
	// settled: nothing is left to remove (a record with a baseline, or one removed).
	settled bool
	// unconfirmed: this process made the record with the cached Release's sync
	// annotation as its baseline, and has not yet read the Release from the API server
	// after the record landed (confirm).
	unconfirmed bool
	// landed: an inventory apply of this process carried the record and went out.
	landed bool
	// previous is the value that confirm replaced with value: the inventory cache may
	// show it a while longer, and it is this process's own record, not another's.
	previous string
}

// owedBaseline separates the two parts of a record: "<recorded at> syncRequestedAt=<the
// Release's sync annotation before the state write>".
const owedBaseline = " syncRequestedAt="

// syncOwedValue returns the value of the inventory's record of an owed sync request, ""
// when there is none.
func (pi passInventory) syncOwedValue() string {
	if pi.inv == nil {
		return ""
	}
	return pi.inv.Annotations[inventory.AnnotationSyncOwed]
}

// newOwedValue returns the value of a new record for rel: the time, and its baseline
// (baselineFor; confirm checks it against the API server after the write).
func (h *HealthController) newOwedValue(key string, rel *v1alpha1.Release) string {
	return h.Clock.Now().UTC().Format(time.RFC3339Nano) + owedBaseline + h.baselineFor(key, rel)
}

// baselineFor is the baseline of a new record for rel: its sync annotation as the cache
// shows it, or the annotation that this process's own last request set when the cache
// has not shown that one yet (an empty annotation, or an earlier time). A request of
// this process's own is never taken for the payment of a later debt, even when the
// process dies before confirm: the pass of the edge after a paid one comes milliseconds
// after that request, before a Release cache shows it.
func (h *HealthController) baselineFor(key string, rel *v1alpha1.Release) string {
	mine := h.recall(key).requested
	if mine != "" && later(mine, rel.Annotations[v1alpha1.SyncRequestedAtAnnotation]) {
		return mine
	}
	return baselineOf(rel)
}

// later reports whether a is a sync request's time (RFC 3339) later than b, or b is
// empty (no request had been served). Anything else is not known to be later.
func later(a, b string) bool {
	at, err := time.Parse(time.RFC3339Nano, a)
	if err != nil {
		return false
	}
	if b == "" {
		return true
	}
	bt, err := time.Parse(time.RFC3339Nano, b)
	return err == nil && at.After(bt)
}

// rebased returns the record value with the baseline of live instead of its own, and
// the same time.
func rebased(value string, live *v1alpha1.Release) string {
	at, _, _ := strings.Cut(value, owedBaseline)
	return at + owedBaseline + baselineOf(live)
}

// liveRelease reads rel from the API server (LiveReader; the cache when there is none).
func (h *HealthController) liveRelease(ctx context.Context, rel *v1alpha1.Release) (*v1alpha1.Release, error) {
	live := &v1alpha1.Release{}
	reader := h.LiveReader
	if reader == nil {
		reader = h.Reader
	}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(rel), live); err != nil {
		return nil, err
	}
	return live, nil
}

// maxBaseline bounds the baseline of a record: /sync writes 30 bytes, but anyone who may
// patch a Release can write up to 256 KiB there, and a record that copied it would not
// fit in the inventory's annotations (every apply carrying it refused, the state never
// written). A longer annotation is recorded as its SHA-256, which no value of at most
// maxBaseline bytes equals.
const maxBaseline = 64

// baselineOf is the baseline of a record for rel: its sync annotation, or the SHA-256
// of one longer than maxBaseline.
func baselineOf(rel *v1alpha1.Release) string {
	at := rel.Annotations[v1alpha1.SyncRequestedAtAnnotation]
	if len(at) <= maxBaseline {
		return at
	}
	sum := sha256.Sum256([]byte(at))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// paidSince reports whether rel shows a sync request served after the record value was
// written; ok is false for a record without a baseline.
func paidSince(rel *v1alpha1.Release, value string) (paid, ok bool) {
	_, baseline, ok := strings.Cut(value, owedBaseline)
	if !ok {
		return false, false
	}
	return baselineOf(rel) != baseline, true
}

// removeSyncOwed removes the record value of an owed sync request from inv with one
// JSON patch under the field manager convoy-sync-owed. The patch tests the inventory's
// uid (never an inventory that was re-created meanwhile) and the record's value, not the
// resourceVersion, so a concurrent writer of the inventory does not make the record
// outlive its payment. A record that is gone or holds another value (a newer debt, or an
// apply that dropped this one) fails the test: nothing is left to remove, and that is
// success.
func (h *HealthController) removeSyncOwed(ctx context.Context, inv *v1alpha1.ReleaseInventory, value string) error {
	err := h.patchSyncOwed(ctx, inv, value, map[string]any{"op": "remove"})
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err) || apierrors.IsNotFound(err): // a failed test is 422 Invalid
		h.logFrom(ctx).V(1).Info("the paid sync record is already gone or replaced", "record", value, "reason", err.Error())
		return nil
	default:
		return fmt.Errorf("removing the record of a paid sync request: %w", err)
	}
}

// replaceSyncOwed replaces the record value of an owed sync request in inv with next, by
// one JSON patch under the field manager convoy-sync-owed with the tests of
// removeSyncOwed. A failed test (the inventory re-created, the record changed meanwhile)
// is an error: the pass is retried, and its applies carry the record again.
func (h *HealthController) replaceSyncOwed(ctx context.Context, inv *v1alpha1.ReleaseInventory, value, next string) error {
	if err := h.patchSyncOwed(ctx, inv, value, map[string]any{"op": "replace", "value": next}); err != nil {
		return fmt.Errorf("writing the owed sync record with the baseline the API server shows: %w", err)
	}
	return nil
}

// patchSyncOwed applies op (remove, or replace with its value) to the record of an owed
// sync request in inv, if inv still has its uid and the record still holds value.
func (h *HealthController) patchSyncOwed(ctx context.Context, inv *v1alpha1.ReleaseInventory, value string, op map[string]any) error {
	path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(inventory.AnnotationSyncOwed)
	op["path"] = path
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(inv.UID)},
		{"op": "test", "path": path, "value": value},
		op,
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	target := &v1alpha1.ReleaseInventory{ObjectMeta: metav1.ObjectMeta{Namespace: inv.Namespace, Name: inv.Name}}
	return h.Writer.Patch(ctx, target, client.RawPatch(types.JSONPatchType, data), client.FieldOwner(inventory.FieldManagerSyncOwed))
}

// owedFor returns what this process knows about the record of an owed sync request of
// key, given the Release and the inventory that the pass read. A record that this
// process did not write, or has forgotten, is paid only by a sync request served after
// it was written (requestedAfter): the Release's annotation differs from the record's
// baseline and is a later time than the record's own. A difference alone is no
// payment: the cached Release may lag behind the cached inventory (two informers), and
// the writer may have died before it confirmed a baseline that its own lagging cache
// gave, so an annotation older than the record differs from the baseline too. When the
// cached Release shows no such request, the API server's copy says; when that shows none
// either, the record is unpaid and sent (a duplicate request is harmless, a lost one is
// not). A record read as paid is remembered. One that this process wrote and the cache
// does not show yet is still its own; one that is settled is forgotten once the cache
// no longer shows it. Without an inventory there is nothing to pay or remove.
func (h *HealthController) owedFor(ctx context.Context, key string, rel *v1alpha1.Release, inv passInventory) (owedState, error) {
	recorded := inv.syncOwedValue()
	var out owedState
	foreign := false
	h.remember(key, func(m *releaseMemory) {
		if m.requested != "" && !later(m.requested, rel.Annotations[v1alpha1.SyncRequestedAtAnnotation]) {
			m.requested = "" // the cache shows this process's last request, or a later one
		}
		st := m.owed
		switch {
		case inv.inv == nil || (recorded == "" && (st.settled || st.value == "")):
			m.owed = owedState{}
		case recorded != "" && recorded != st.value && recorded != st.previous && (st.value == "" || st.paid):
			foreign = true
		default:
			// An unpaid record of this process's own stays its debt whatever an inventory
			// cache shows (an older record of its own, a lagging cache); one that the cache
			// shows has landed, whether or not its apply's answer came back.
			if recorded != "" && recorded == st.value && !st.landed {
				st.landed = true
				m.owed = st
			}
			out = st
		}
	})
	if !foreign {
		return out, nil
	}
	if changed, _ := paidSince(rel, recorded); !changed {
		return owedState{value: recorded}, nil // unpaid (or a payment the cache lags behind): pay it
	}
	paid := requestedAfter(rel, recorded)
	if !paid {
		live, err := h.liveRelease(ctx, rel)
		if err != nil {
			return owedState{}, fmt.Errorf("reading the sync annotation of the Release to tell whether the owed sync request was paid: %w", err)
		}
		paid = requestedAfter(live, recorded)
	}
	out = owedState{value: recorded, paid: paid, settled: paid}
	if paid {
		h.setOwed(key, out)
	}
	return out, nil
}

// requestedAfter reports whether rel shows a sync request served after the record value
// was written: its sync annotation differs from the record's baseline, and is a time in
// RFC 3339 (what /sync writes) later than the record's own time. The two times come from
// two clocks, the observer's and convoy-api's: one behind the other makes a payment
// served within the difference read as unpaid, and it is sent again. Anything else (a
// record or annotation that is no time, an earlier time) is no payment known.
func requestedAfter(rel *v1alpha1.Release, value string) bool {
	at, _, ok := strings.Cut(value, owedBaseline)
	if changed, _ := paidSince(rel, value); !ok || !changed || at == "" {
		return false
	}
	return later(rel.Annotations[v1alpha1.SyncRequestedAtAnnotation], at)
}

// setOwed stores st for key; a zero st forgets it.
func (h *HealthController) setOwed(key string, st owedState) {
	h.remember(key, func(m *releaseMemory) { m.owed = st })
}

// owedSync is one pass's part in the life of the owed sync request of its Release:
// openOwed arms the request and decides the record that the pass's applies carry,
// carry says what it is, confirm checks a new record's baseline after the writes, and
// settle sends the request and pays (and, for an older observer's record, removes) the
// record.
type owedSync struct {
	h   *HealthController
	key string
	st  owedState
}

// openOwed starts the owed sync request of one pass, before it writes: the request is
// sent (settle) when the pass has an edge or carries an unpaid record. The record that
// the applies carry is the unpaid one, or a new one (from the cache, confirmed after the
// writes) when the pass persists the state of an edge: a completed wave or an advanced
// render always changes entries; a finished hook changes the hooks unless it is a
// re-poll in its arming second that found the same outcome. Without a Waker there is nobody to owe. A record this
// process has paid already (its removal failed, or the cache has not seen the removal
// yet) is only removed, not paid again.
func (h *HealthController) openOwed(ctx context.Context, rel *v1alpha1.Release, inv passInventory, res passResult) (*owedSync, error) {
	key := keyOf(rel)
	st, err := h.owedFor(ctx, key, rel, inv)
	if err != nil {
		return nil, err
	}
	o := &owedSync{h: h, key: key, st: st}
	e := res.edges
	if o.carry() != "" {
		return o, nil
	}
	persists := e.waveCompleted || e.renderAdvanced || (e.hooksFinished > 0 && res.hooks.status != nil)
	if persists && inv.inv != nil && h.Waker != nil {
		o.st = owedState{value: h.newOwedValue(key, rel), unconfirmed: true}
		h.setOwed(key, o.st)
	}
	return o, nil
}

// confirm checks the baseline of a record that this process made from the cache, once
// an apply carrying it has landed (in this pass or an earlier one), before the request
// is sent: live is the Release as the API server answered the pass's condition apply,
// the last write of the pass; nil when the pass wrote none, and then one GET reads it.
// The same annotation confirms the record. A different one is a sync request that the
// cache did not show yet, served before the write or after it: the record's value is
// replaced (replaceSyncOwed) by one with the annotation read after the write as its
// baseline, so that request can never read as the payment of this debt; this process
// takes the old value for its own while a cache shows it. Until the record landed there
// is nothing to confirm: a read before it would not see a request served in between. A
// Release gone meanwhile needs nothing: settle finds nobody to wake.
func (o *owedSync) confirm(ctx context.Context, live *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) error {
	h, st := o.h, o.st
	if !st.unconfirmed || !st.landed || st.paid || inv == nil {
		return nil
	}
	if live == nil {
		var err error
		if live, err = h.liveRelease(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: inv.Namespace, Name: inv.Name}}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("reading the sync annotation of the Release to confirm the owed sync record: %w", err)
		}
	}
	if changed, _ := paidSince(live, st.value); changed {
		next := rebased(st.value, live)
		h.logFrom(ctx).V(1).Info("the cache lagged behind a sync request: the owed sync record takes the annotation the API server shows",
			"record", st.value, "rebased", next)
		if err := h.replaceSyncOwed(ctx, inv, st.value, next); err != nil {
			return h.writeFailed(ctx, "sync-owed", err)
		}
		st.previous, st.value = st.value, next
	}
	st.unconfirmed = false
	o.st = st
	h.setOwed(o.key, st)
	return nil
}

// landed notes that an inventory apply carrying the record went out.
func (o *owedSync) landed() {
	if o.carry() == "" || o.st.landed {
		return
	}
	o.st.landed = true
	o.h.setOwed(o.key, o.st)
}

// carry is the record that the pass's inventory applies carry: the unpaid one, "" for
// none.
func (o *owedSync) carry() string {
	if o.st.value != "" && !o.st.paid {
		return o.st.value
	}
	return ""
}

// settle is the last step of a pass, after its writes landed: it sends the sync request
// when the pass has an edge or owes one (wake), marks the record paid, and removes an
// older observer's record (without a baseline) with the last write of the pass.
func (o *owedSync) settle(ctx context.Context, rel *v1alpha1.Release, inv passInventory, e edges) error {
	h, st := o.h, o.st
	sent, err := h.wake(ctx, rel, e, o.carry() != "")
	if err != nil {
		return err
	}
	if st.value == "" {
		return nil
	}
	if sent && !st.paid {
		// A record with a baseline now reads as paid from the Release: nothing to remove,
		// unless confirm replaced its value: the replacing patch made the field its own,
		// and no apply would drop it.
		_, withBaseline := paidSince(rel, st.value)
		st.paid, st.settled = true, withBaseline && st.previous == ""
		h.setOwed(o.key, st)
	}
	if st.paid && !st.settled {
		if err := h.removeSyncOwed(ctx, inv.inv, st.value); err != nil {
			return h.writeFailed(ctx, "sync-owed", err)
		}
		st.settled = true
		h.setOwed(o.key, st)
	}
	return nil
}

// wake sends one POST …/sync for rel when this pass has an edge, or when it carries an
// unpaid owed record (owed: an earlier pass persisted an edge and did not get the request
// through; the edge itself does not come back). The record is the one truth of a pending
// wake-up: a pass that persists the state of an edge writes it with that state, and this
// process remembers it (owedState) for a cache that lags. A failed request fails the
// pass, so the work queue retries the key. sent reports that the debt is settled: the
// request succeeded, or there is nobody to wake (no Waker, the Release is gone).
func (h *HealthController) wake(ctx context.Context, rel *v1alpha1.Release, e edges, owed bool) (sent bool, err error) {
	retry := owed && !e.any()
	if !e.any() && !owed {
		return false, nil
	}
	log := h.logFrom(ctx).WithValues("waveCompleted", e.waveCompleted, "renderAdvanced", e.renderAdvanced, "hooksFinished", e.hooksFinished, "retry", retry)
	if h.Waker == nil {
		log.Info("edge reached, but sync requests are disabled (--disable-sync): the controller-manager is not woken")
		return true, nil
	}
	resp, err := h.Waker.Sync(ctx, rel.Namespace, rel.Name)
	if err != nil && releaseGone(err, rel.Name) {
		// The Release is gone: nobody is left to wake, and a retry would never succeed.
		syncRequests.WithLabelValues("gone").Inc()
		log.Info("the sync endpoint says the Release does not exist; not retrying", "error", err.Error())
		return true, nil
	}
	if err != nil { // the record stays unpaid: the next pass sends it again
		if ctx.Err() == nil {
			syncRequests.WithLabelValues("error").Inc()
		}
		return false, fmt.Errorf("waking the controller-manager: %w", err)
	}
	syncRequests.WithLabelValues("ok").Inc()
	if resp != nil && resp.SyncRequestedAt != "" {
		at := resp.SyncRequestedAt
		h.remember(keyOf(rel), func(m *releaseMemory) { m.requested = at })
	}
	log.Info("woke the controller-manager")
	return true, nil
}
