package healthloop

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/controllerkit"
)

// passResult is what one pass computed before it writes anything (docs/design.md, "The
// write protocol"): the hooks' new status, the assessment of the entries, the Healthy
// condition, the edges that owe the controller-manager a sync request and the targets
// still pending. decide makes it, commit writes it, recordPass records the rest; nothing
// in it has been written yet.
type passResult struct {
	hooks hookOutcome
	// a is the assessment; nil when there is none (deletion, no healthAssessment, a
	// failed assessment).
	a *assessment
	// hs is the Healthy condition and healthSummary; nil writes none (deletion).
	hs *healthStatus
	// edges are the edges of this pass.
	edges edges
	// pending are the re-check targets still pending (scheduleHealthRecheck).
	pending []string
	// assessErr is why the Release could not be assessed (hs says it); nil otherwise.
	assessErr error
}

// commit is the write half of a pass: it writes res with a committer, one write after
// the other, each carrying the resourceVersion that the previous one produced, and then
// settles the owed sync request (owed.go): the confirmation of a new record's baseline
// once the record landed (its value replaced when the API server shows another), the
// sync request when the pass has an edge or owes one, then the removal of a paid record.
// A cancelled context writes nothing: what this pass computed from cut-off reads is not
// the truth.
//
// The hooks and the entries are independent: a failed hooks write does not hold back the
// entries and the condition. It still fails the pass, after them, so the hook state is
// retried; the sync request waits for it (it would announce a hook state that did not
// land), and the debt stays armed for the retry.
func (h *HealthController) commit(ctx context.Context, rel *v1alpha1.Release, inv passInventory, res passResult) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	owed, err := h.openOwed(ctx, rel, inv, res)
	if err != nil {
		return h.writeFailed(ctx, "sync-owed", err) // a Release deleted meanwhile: quiet
	}
	c := &committer{h: h, rel: rel, inv: inv.inv, rv: inv.resourceVersion(), owed: owed}
	settle, err := c.write(ctx, res)
	// A new record's baseline is confirmed once the record landed, whatever came after
	// it: a pass that failed later must not leave the cache's baseline unchecked until
	// its retry.
	if cerr := owed.confirm(ctx, c.live, inv.inv); cerr != nil {
		return failedWrites(err, cerr)
	}
	if err != nil || !settle {
		return err
	}
	return owed.settle(ctx, rel, inv, res.edges)
}

// write makes the writes of res, in order; settle is false when the sync request must
// wait (a write refused as too large, said in the condition instead).
func (c *committer) write(ctx context.Context, res passResult) (settle bool, err error) {
	prev := priorCondition(c.rel)
	hooksErr := c.hooks(ctx, res.hooks)
	// A write refused as too large is said in the condition instead, once, and not
	// retried (toolarge.go); a deletion pass writes no condition, so it retries.
	var refused *refusedWrite
	if res.hs != nil && errors.As(hooksErr, &refused) {
		hooksErr = nil
	}
	if res.a != nil {
		if err := c.entries(ctx, res.a); err != nil {
			var r *refusedWrite
			if res.hs == nil || !errors.As(err, &r) {
				return false, failedWrites(hooksErr, err)
			}
			if refused == nil {
				refused = r
			}
		}
	}
	if refused != nil {
		return false, failedWrites(hooksErr, c.refused(ctx, prev, refused))
	}
	if res.hs != nil {
		if err := c.condition(ctx, prev, *res.hs, res.a); err != nil {
			return false, failedWrites(hooksErr, err)
		}
	}
	return hooksErr == nil, hooksErr
}

// committer writes the result of one pass, one method per write. rv is the
// resourceVersion precondition of the next inventory write: the one the pass read, then
// the one each write produced. owed is the pass's owed sync request, whose record
// (carry) the inventory applies carry; each apply that lands with it says so (landed).
// live is the Release as the API server answered the condition apply (nil when the pass
// wrote none).
type committer struct {
	h    *HealthController
	rel  *v1alpha1.Release
	inv  *v1alpha1.ReleaseInventory
	rv   string
	owed *owedSync
	live *v1alpha1.Release
}

// hooks applies the hooks' status (writeHookStatus) and records the Events of the hooks
// that finished; a failed write is returned for the queue and records none.
func (c *committer) hooks(ctx context.Context, out hookOutcome) error {
	rv, err := c.h.writeHookStatus(ctx, c.inv, c.rv, out, c.owed.carry())
	if err != nil {
		return c.h.writeFailed(ctx, "hooks", err)
	}
	c.landed(rv)
	c.h.recordHookEvents(c.rel, out)
	return nil
}

// entries applies the entries' health (writeInventoryHealth). A write refused as too
// large is a *refusedWrite, which commit says in the Healthy condition.
func (c *committer) entries(ctx context.Context, a *assessment) error {
	rv, err := c.h.writeInventoryHealth(ctx, a, c.rv, c.owed.carry())
	if err != nil {
		return c.h.writeFailed(ctx, "entries", err)
	}
	c.landed(rv)
	return nil
}

// landed takes the resourceVersion rv of an inventory write: a new one means the apply
// went out, carrying the owed sync record if there is one.
func (c *committer) landed(rv string) {
	if rv != c.rv {
		c.owed.landed()
	}
	c.rv = rv
}

// condition applies the Healthy condition and healthSummary (writeHealth), then records
// the Event of its edge from prev, the condition the pass read.
func (c *committer) condition(ctx context.Context, prev *metav1.Condition, hs healthStatus, a *assessment) error {
	live, err := c.h.writeHealth(ctx, c.rel, hs)
	if err != nil {
		return c.h.writeFailed(ctx, "status", err)
	}
	c.live = live
	c.h.recordHealthEvents(ctx, c.rel, prev, hs, a)
	return nil
}

// writeFailed returns the error of a failed write for the queue. A conflict with the
// inventory's uid or resourceVersion precondition (the cache lagged behind the
// controller-manager, or it deleted the inventory) and a NotFound (the object is gone)
// are expected: counted, logged at V(1), and retried quietly once the cache catches up.
func (h *HealthController) writeFailed(ctx context.Context, write string, err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		writeConflicts.WithLabelValues(write).Inc()
		h.logFrom(ctx).V(1).Info("write lost a precondition race; retrying", "write", write, "reason", err.Error())
		return controllerkit.Quiet(err)
	}
	return err
}

// failedWrites joins the errors of the failed writes of one pass; the result is
// controllerkit.Quiet only when each of them is (a lost precondition race), so a real failure is
// never logged at V(1) only.
func failedWrites(errs ...error) error {
	var all []error
	quiet := true
	for _, err := range errs {
		if err == nil {
			continue
		}
		all = append(all, err)
		quiet = quiet && controllerkit.IsQuiet(err)
	}
	switch {
	case len(all) == 0:
		return nil
	case len(all) == 1:
		return all[0]
	case quiet:
		return controllerkit.Quiet(errors.Join(all...))
	}
	for i, err := range all {
		if controllerkit.IsQuiet(err) {
			all[i] = errors.Unwrap(err) // Quiet(err) wraps err itself
		}
	}
	return errors.Join(all...)
}
