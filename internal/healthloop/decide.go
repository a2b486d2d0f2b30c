package healthloop

import (
	"time"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// passInput is everything one pass read before it decides (docs/design.md, "One pass"):
// the Release, the reads of its hooks' workloads, the observation of its entries, what the loop
// remembers of its last pass, the evaluation budget and the time.
type passInput struct {
	rel *v1alpha1.Release
	// hooks is what the pass read of its hooks (observeHooks); nil: no inventory.
	hooks *hookObservation
	// observed is the observation of the entries (observeEntries); nil on a deletion
	// pass, without healthAssessment, or when assessErr is set.
	observed *observation
	// assessErr: the Release could not be assessed (a rule set that does not compile, a
	// missing or unreachable Cluster, an unreadable inventory).
	assessErr error
	// budgetCutBefore: the Release's previous pass was cut by the evaluation budget.
	budgetCutBefore bool
	// budget is the pass's evaluation budget in CEL cost units, for the message of a cut
	// entry.
	budget uint64
	now    time.Time
}

// decide computes the result of a pass from what it read: the hooks' status
// (decideHooks), the entries judged (health.Judge with the Release's deadline, at in.now), the Healthy
// condition and healthSummary, the edges that owe the controller-manager a sync request,
// and the targets still pending for the re-check backoff. It is pure: no client, no
// cache, no clock, no memory; the pass writes and records the result afterwards (commit,
// then recordPass).
func decide(in passInput) passResult {
	hooks := decideHooks(in.hooks, in.now)
	res := passResult{hooks: hooks, edges: edges{hooksFinished: hooks.finished}}
	rel := in.rel
	switch {
	case rel.DeletionTimestamp != nil:
		// A deletion pass writes only the hooks.
	case rel.Spec.HealthAssessment == nil:
		hs := notConfigured(rel)
		res.hs = &hs
	case in.assessErr != nil:
		hs := assessFailed(rel, in.assessErr)
		res.hs, res.assessErr = &hs, in.assessErr
		res.pending = append(res.pending, targetAssessment)
	default:
		a := judge(in.observed, deadlineOf(rel), rel.Spec.HealthAssessment.GetFailFast(), in.now, in.budget, in.budgetCutBefore)
		hs := a.healthStatus(rel)
		res.a, res.hs = a, &hs
		res.pending = append(res.pending, a.pendingTargets(hs)...)
		res.edges.waveCompleted, res.edges.renderAdvanced = a.waveCompleted, a.renderAdvanced
	}
	res.pending = append(res.pending, hooks.pendingTargets()...)
	return res
}

// deadlineOf is rel's spec.healthAssessment.deadline; nil when it has none.
func deadlineOf(rel *v1alpha1.Release) *time.Duration {
	d, ok := rel.GetDeadline()
	if !ok {
		return nil
	}
	return &d
}

// judge gives every observed entry its state (judgeEntry, with the Release's deadline
// and failFast) and sums up the assessment: the entries the budget cut, whether an
// entry's render advanced, whether the frontier wave completed. o nil is an assessment
// without inventory.
func judge(o *observation, deadline *time.Duration, failFast bool, now time.Time, budget uint64, cutBefore bool) *assessment {
	a := &assessment{}
	if o == nil {
		return a
	}
	a.inv, a.own, a.stale, a.unowned, a.unjudged = o.inv, o.own, o.stale, o.unowned, o.unjudged
	if len(o.entries) == 0 {
		return a
	}
	a.entries = make([]itemResult, len(o.entries))
	for i := range o.entries {
		a.entries[i] = judgeEntry(&o.entries[i], deadline, failFast, now, budget)
		if a.entries[i].cut {
			a.budgetCut++
		}
		if a.entries[i].entry.RenderRef != a.entries[i].prior.assessedRenderRef {
			a.renderAdvanced = true
		}
	}
	a.budgetCutBefore = cutBefore
	a.waveCompleted = frontierWaveCompleted(a.entries)
	return a
}

// judgeEntry gives one observed entry its state (docs/design.md, "Per-entry
// evaluation", the judgement): health.JudgeFailFast of the engine's result against the
// entry's firstUnhealthy, the deadline and, with failFast, the entry's
// diagnosis (docs/design.md, "Diagnosis"). A Healthy entry has no message and no
// diagnosis. An entry the budget cut is Unknown with budgetMessage, and keeps its
// firstUnhealthy and assessedRenderRef (it was not judged, so neither its anchor nor its
// render moves).
func judgeEntry(o *entryObservation, deadline *time.Duration, failFast bool, now time.Time, budget uint64) itemResult {
	r := itemResult{entry: o.entry, key: o.key, prior: o.prior, rulesApplied: o.rulesApplied}
	if o.cut {
		r.state, r.message, r.anchor, r.cut = v1alpha1.StateUnknown, budgetMessage(budget), o.prior.firstUnhealthy, true
		r.diagnosis = o.entry.Diagnosis // not read this pass: kept
		// writeInventoryHealth writes entry.RenderRef as assessedRenderRef: keep the old one.
		r.entry.RenderRef = o.prior.assessedRenderRef
		return r
	}
	j := health.JudgeFailFast(o.res, o.prior.firstUnhealthy, deadline, now, failFast, o.diagnosis.Terminal)
	r.state, r.message, r.anchor, r.decidedBy = j.State, o.res.Message, j.FirstUnhealthy, j.DecidedBy
	r.ruleSet, r.rule, r.diagnosis = o.res.RuleSet, o.res.RuleIndex, o.diagnosis.Message
	if r.state == v1alpha1.StateHealthy {
		r.message, r.diagnosis = "", ""
	}
	return r
}

// frontierWaveCompleted reports whether every entry of the highest wave is Healthy now
// and one or more of them was not Healthy before this pass (docs/design.md, "Wake the
// controller").
func frontierWaveCompleted(results []itemResult) bool {
	if len(results) == 0 {
		return false
	}
	frontier := results[0].entry.GetWave()
	for i := range results {
		frontier = max(frontier, results[i].entry.GetWave())
	}
	changed := false
	for i := range results {
		if results[i].entry.GetWave() != frontier {
			continue
		}
		if results[i].state != v1alpha1.StateHealthy {
			return false
		}
		if results[i].prior.state != v1alpha1.StateHealthy {
			changed = true
		}
	}
	return changed
}
