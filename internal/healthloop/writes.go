package healthloop

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// writeInventoryHealth applies each recorded entry's keys, state, message,
// firstUnhealthy, assessedRenderRef, decidedBy (when a rule decided), rulesApplied and
// diagnosis (of a failing workload) under the field manager convoy-health-inventory
// (docs/design.md, "The write protocol"). It sends only entries that the controller-manager records, so an
// entry that it dropped is released and vanishes. An empty set writes nothing, unless
// the observer still owns a dropped entry: then it applies the empty list to let go.
// It skips the write when the observer already owns exactly these values. rv is the
// resourceVersion precondition (the one the pass read, or the one its hooks write
// produced); it returns the resourceVersion after the write. record, when not "", is the
// record of an owed sync request that the apply carries (owed.go).
func (h *HealthController) writeInventoryHealth(ctx context.Context, a *assessment, rv, record string) (string, error) {
	if a.inv == nil || (len(a.entries) == 0 && !a.stale) {
		return rv, nil
	}
	own := a.own
	if own == nil {
		var err error
		if own, err = inventory.ReadOwnership(a.inv); err != nil {
			return rv, fmt.Errorf("reading the ReleaseInventory's field owners: %w", err)
		}
	}
	unchanged := !a.stale
	list := make([]*acv1alpha1.InventoryEntryApplyConfiguration, 0, len(a.entries))
	for i := range a.entries {
		r := &a.entries[i]
		// The four keys (group and namespace too when "") and the observer's fields only; a
		// field left out is one the observer lets go of.
		e := acv1alpha1.InventoryEntry().WithGroup(r.key.Group).WithKind(r.key.Kind).
			WithNamespace(r.key.Namespace).WithName(r.key.Name).WithState(r.state)
		if r.message != "" {
			e.WithMessage(r.message)
		}
		var anchor *metav1.Time
		if r.anchor != nil {
			t := metav1.NewTime(r.anchor.UTC().Truncate(time.Second))
			anchor = &t
			e.WithFirstUnhealthy(t)
		}
		if r.entry.RenderRef != "" {
			e.WithAssessedRenderRef(r.entry.RenderRef)
		}
		// decidedBy only for a state a rule decided; left out (let go of) otherwise.
		if d := inventory.RecordDecider(r.decidedBy); d != nil {
			e.WithDecidedBy(d)
		}
		e.WithRulesApplied(r.rulesApplied)
		if r.diagnosis != "" {
			e.WithDiagnosis(r.diagnosis)
		}
		list = append(list, e)
		if !own.EntryOwnedBy(inventory.FieldManagerInventory, r.key) ||
			r.entry.State != r.state || r.entry.Message != r.message || r.entry.Diagnosis != r.diagnosis ||
			r.entry.AssessedRenderRef != r.entry.RenderRef ||
			!equalTime(r.entry.FirstUnhealthy, anchor) ||
			!equalDecider(r.entry.DecidedBy, r.decidedBy) ||
			r.entry.RulesApplied == nil || *r.entry.RulesApplied != r.rulesApplied {
			unchanged = false
		}
	}
	// The cache may not show this process's last entries apply yet: skip only when that
	// apply sent the same list. Else the apply goes out with the cache's resourceVersion,
	// which fails as a conflict when the cache lags, and the retry reads a fresher one.
	key := keyOf(a.inv)
	sum := entriesSum(list)
	if last := h.recall(key); unchanged && (!last.entriesWritten || last.entriesSum == sum) {
		return rv, nil
	}
	ac := inventoryApply(a.inv, rv, record).WithEntries(list...)
	if err := h.Writer.Apply(ctx, ac, client.FieldOwner(inventory.FieldManagerInventory), client.ForceOwnership); err != nil {
		return rv, fmt.Errorf("applying the health of %d inventory entries: %w", len(list), asRefused("entries", len(list), ac, err))
	}
	h.remember(key, func(m *releaseMemory) { m.entriesSum, m.entriesWritten = sum, true })
	return ptr.Deref(ac.ResourceVersion, rv), nil
}

// entriesSum is a digest of the entries list of an apply: FNV-64a of its JSON, which the
// encoder writes straight into the hash (no copy of the JSON is kept).
func entriesSum(list []*acv1alpha1.InventoryEntryApplyConfiguration) uint64 {
	d := fnv.New64a()
	_ = json.NewEncoder(d).Encode(list)
	return d.Sum64()
}

// inventoryApply starts an apply to inv with two preconditions. The uid: an apply
// never re-creates an inventory that the controller-manager deleted meanwhile. The
// resourceVersion rv: an apply built from a cache that lags behind the controller-manager
// never brings back an entry or hook it has just dropped. A stale resourceVersion fails
// with a conflict, which the queue retries quietly once the cache has caught up; another
// uid sent without a resourceVersion is refused as 422 Invalid (metadata.uid is
// immutable; internal/metaapply's TestApplyErrorsAreTheAPIServers), an error the queue
// retries as well. record, when not "", is
// the record of an owed sync request that the apply carries (owed.go).
func inventoryApply(inv *v1alpha1.ReleaseInventory, rv, record string) *acv1alpha1.ReleaseInventoryApplyConfiguration {
	ac := acv1alpha1.ReleaseInventory(inv.Name, inv.Namespace).WithUID(inv.UID)
	if rv != "" {
		ac.WithResourceVersion(rv)
	}
	if record != "" {
		ac.WithAnnotations(map[string]string{inventory.AnnotationSyncOwed: record})
	}
	return ac
}

// equalDecider reports whether the recorded decidedBy is the one of this pass.
func equalDecider(recorded *v1alpha1.EntryDecider, d *health.Decider) bool {
	if recorded == nil || d == nil {
		return recorded == nil && d == nil
	}
	return *inventory.DeciderOf(recorded) == *d
}

func equalTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Unix() == b.Unix()
}

// healthStatus is what writeHealth writes: the Healthy condition and healthSummary.
type healthStatus struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	// summary is written as it is; nil writes none.
	summary *v1alpha1.HealthSummary
	// cause is the error of a failed assessment (for its Event); nil otherwise.
	cause error
}

// notConfigured is the status of a Release without spec.healthAssessment.
func notConfigured(*v1alpha1.Release) healthStatus {
	return healthStatus{status: metav1.ConditionTrue, reason: v1alpha1.ReasonNotConfigured,
		message: "spec.healthAssessment is not set", summary: &v1alpha1.HealthSummary{}}
}

// healthStatus derives the Healthy condition from the entries (docs/design.md, "Healthy
// condition"), in the table's order.
func (a *assessment) healthStatus(rel *v1alpha1.Release) healthStatus {
	entries := make([]v1alpha1.InventoryEntry, len(a.entries))
	for i := range a.entries {
		entries[i] = a.entries[i].entry
		entries[i].State = a.entries[i].state
	}
	sum := inventory.Summarize(entries)
	hs := healthStatus{summary: &sum}
	count := fmt.Sprintf("%d/%d healthy", sum.Healthy, sum.Total)
	first := func(state v1alpha1.HealthState) string {
		for i := range a.entries {
			if a.entries[i].state == state {
				k := a.entries[i].key
				msg := fmt.Sprintf("%s; %s", count, objectName(k.Kind, k.Namespace, k.Name))
				if a.entries[i].message != "" {
					msg += ": " + a.entries[i].message
				}
				return msg
			}
		}
		return count
	}
	last := rel.GetLastAttemptedRenderRef()
	switch {
	case len(a.entries) == 0 && a.unowned > 0:
		hs.status, hs.reason = metav1.ConditionUnknown, v1alpha1.ReasonUnknown
		hs.message = fmt.Sprintf("%s; the ReleaseInventory has %d entries that no field manager owns (no managedFields), so none is assessed: "+
			"the controller-manager must apply the inventory with Server-Side Apply", count, a.unowned)
	case !inventory.RenderCurrent(last, entries):
		behind := 0
		for i := range entries {
			if entries[i].RenderRef != last {
				behind++
			}
		}
		hs.status, hs.reason = metav1.ConditionUnknown, v1alpha1.ReasonPending
		hs.message = fmt.Sprintf("%s; waiting for render %q: %d of %d entries are from another render", count, last, behind, len(entries))
	case sum.Degraded > 0:
		hs.status, hs.reason, hs.message = metav1.ConditionFalse, v1alpha1.ReasonDegraded, first(v1alpha1.StateDegraded)
	case sum.Unknown > 0:
		hs.status, hs.reason, hs.message = metav1.ConditionUnknown, v1alpha1.ReasonUnknown, first(v1alpha1.StateUnknown)
	case sum.Progressing > 0:
		hs.status, hs.reason, hs.message = metav1.ConditionFalse, v1alpha1.ReasonProgressing, first(v1alpha1.StateProgressing)
	default:
		hs.status, hs.reason, hs.message = metav1.ConditionTrue, v1alpha1.ReasonHealthy, count
	}
	return hs
}

// writeHealth applies the Healthy condition and healthSummary to rel's status under the
// field manager convoy-health, with force: the observer is their only owner, and an earlier
// Update under the same name would otherwise conflict. It skips the write when nothing
// changed; lastTransitionTime moves only when the status does. live is the Release's
// metadata as the API server answered the apply (its annotations: the owed sync record's
// confirmation, owed.go), nil when nothing was written.
func (h *HealthController) writeHealth(ctx context.Context, rel *v1alpha1.Release, hs healthStatus) (live *v1alpha1.Release, err error) {
	recordSummary(rel.Namespace, rel.Name, hs.summary)
	key := keyOf(rel)
	same := func(c *metav1.Condition, summary *v1alpha1.HealthSummary) bool {
		return c != nil && c.Status == hs.status && c.Reason == hs.reason && c.Message == truncateCondition(hs.message) &&
			c.ObservedGeneration == rel.Generation && equality.Semantic.DeepEqual(summary, hs.summary)
	}
	// The cache may not show this process's last write yet (a pass right after another
	// one): skip only when neither the cache nor that write differs, and take the
	// transition time from the newer of the two.
	prev := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy)
	last := h.recall(key).written
	if same(prev, rel.Status.HealthSummary) && (last == nil || same(&last.cond, last.summary)) {
		return nil, nil
	}
	if last != nil {
		prev = &last.cond
	}
	transition := metav1.NewTime(h.Clock.Now().UTC().Truncate(time.Second))
	if prev != nil && prev.Status == hs.status {
		transition = prev.LastTransitionTime
	}
	cond := metav1ac.Condition().WithType(v1alpha1.ConditionHealthy).WithStatus(hs.status).
		WithReason(hs.reason).WithMessage(truncateCondition(hs.message)).
		WithObservedGeneration(rel.Generation).WithLastTransitionTime(transition)
	status := acv1alpha1.ReleaseStatus().WithConditions(cond)
	if s := hs.summary; s != nil {
		status.WithHealthSummary(acv1alpha1.HealthSummary().WithTotal(s.Total).WithHealthy(s.Healthy).
			WithProgressing(s.Progressing).WithDegraded(s.Degraded).WithUnknown(s.Unknown))
	}
	ac := acv1alpha1.Release(rel.Name, rel.Namespace).WithStatus(status)
	if err := h.Writer.Status().Apply(ctx, ac, client.FieldOwner(inventory.FieldManagerHealth), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("applying the Healthy condition (%s/%s): %w", hs.status, hs.reason, err)
	}
	written := &writtenHealth{cond: metav1.Condition{Type: v1alpha1.ConditionHealthy, Status: hs.status,
		Reason: hs.reason, Message: truncateCondition(hs.message), ObservedGeneration: rel.Generation,
		LastTransitionTime: transition}, summary: hs.summary.DeepCopy()}
	h.remember(key, func(m *releaseMemory) { m.written = written })
	h.logFrom(ctx).Info("health written", "status", hs.status, "reason", hs.reason, "message", hs.message)
	live = &v1alpha1.Release{}
	if ac.ObjectMetaApplyConfiguration != nil {
		live.Annotations = ac.Annotations
	}
	return live, nil
}

// writtenHealth is the Healthy condition and healthSummary that this process last
// applied to a Release.
type writtenHealth struct {
	cond    metav1.Condition
	summary *v1alpha1.HealthSummary
}

// maxConditionMessage bounds a condition message: metav1.Condition's limit, 32768.
const maxConditionMessage = 32768

// truncateCondition keeps a condition message on one line and within
// maxConditionMessage bytes (oneLine).
func truncateCondition(s string) string { return oneLine(s, maxConditionMessage) }

// oneLine collapses every run of white space in s into one space and cuts the result to
// at most limit bytes, ending a cut one in "…" and never splitting a UTF-8 sequence.
func oneLine(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= limit {
		return s
	}
	cut := limit - len("…")
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// objectName names an object in a message: "Kind name", or "Kind namespace/name".
func objectName(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
