package health

import (
	"time"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// DeriveState turns the Result of one inventory entry and its firstUnhealthy anchor into
// the entry's state and its new anchor (docs/design.md, "Per-entry evaluation" and
// "Anchors"):
//
//   - Error: Unknown; the anchor is kept as it is (nil stays nil).
//   - Pass: Healthy; the anchor is cleared (nil).
//   - Fail: the anchor becomes now when it is nil. A terminal Fail (r.Terminal: a
//     failedExpression said so) is Degraded at once. Otherwise, without a deadline
//     (deadline nil) the state is Progressing; with one it is Degraded when
//     now − anchor ≥ *deadline, else Progressing.
//
// now is the time of this pass; DeriveState reads no clock. The subtraction saturates
// (time.Time.Sub), so an anchor far in the past or a huge deadline never overflows. An
// anchor after now (clock skew) gives a negative elapsed time, hence Progressing for any
// deadline ≥ 0. The returned anchor is a fresh pointer, never firstUnhealthy itself.
// An Outcome other than the three constants is treated as Error. For an object that the
// loop cannot read, pass Result{Outcome: Error, Message: "object not found"} (or
// "cannot read object: <error>", docs/design.md, "Messages"): it is Unknown and keeps its
// anchor like an evaluation error.
func DeriveState(r Result, firstUnhealthy *time.Time, deadline *time.Duration, now time.Time) (v1alpha1.HealthState, *time.Time) {
	switch r.Outcome {
	case Pass:
		return v1alpha1.StateHealthy, nil
	case Fail:
		anchor := now
		if firstUnhealthy != nil {
			anchor = *firstUnhealthy
		}
		if r.Terminal || (deadline != nil && now.Sub(anchor) >= *deadline) {
			return v1alpha1.StateDegraded, &anchor
		}
		return v1alpha1.StateProgressing, &anchor
	default:
		if firstUnhealthy == nil {
			return v1alpha1.StateUnknown, nil
		}
		anchor := *firstUnhealthy
		return v1alpha1.StateUnknown, &anchor
	}
}

// Explain returns which rule decided state, the state that DeriveState derived from r:
// r.DecidedBy, except that a failing rule (CauseRuleFailed) that left the entry Degraded
// gets CauseDeadlinePassed, since only the deadline turns a non-terminal failure
// Degraded (a terminal one is CauseFailed already). It returns
// nil when no rule decided (a Healthy state, or an object that could not be read). The
// result is a new Decider; r.DecidedBy is not modified.
func Explain(r Result, state v1alpha1.HealthState) *Decider {
	if r.DecidedBy == nil || state == v1alpha1.StateHealthy {
		return nil
	}
	d := *r.DecidedBy
	if d.Cause == CauseRuleFailed && state == v1alpha1.StateDegraded {
		d.Cause = CauseDeadlinePassed
	}
	return &d
}

// Judgement is what one Result means for its inventory entry: the state, the new
// firstUnhealthy anchor (nil: cleared) and the rule that decided the state (nil: none).
type Judgement struct {
	State          v1alpha1.HealthState
	FirstUnhealthy *time.Time
	DecidedBy      *Decider
}

// Judge derives the Judgement of r: the state and anchor of DeriveState and the rule of
// Explain. It is the one step after evaluation that the loop (which records the rule in
// the inventory, where /health reads it) and convoyctl health eval share, so that they
// never disagree.
func Judge(r Result, firstUnhealthy *time.Time, deadline *time.Duration, now time.Time) Judgement {
	state, anchor := DeriveState(r, firstUnhealthy, deadline, now)
	return Judgement{State: state, FirstUnhealthy: anchor, DecidedBy: Explain(r, state)}
}

// JudgeFailFast is Judge, then FailFast of the entry's diagnosis (terminal or not) when
// the Release has spec.healthAssessment.failFast: the one judgement of an entry that the
// loop (judgeEntry, which records it) and convoyctl health eval share (docs/design.md,
// "Diagnosis"). Without failFast it is Judge exactly.
func JudgeFailFast(r Result, firstUnhealthy *time.Time, deadline *time.Duration, now time.Time, failFast, terminal bool) Judgement {
	j := Judge(r, firstUnhealthy, deadline, now)
	if failFast {
		j = FailFast(j, terminal)
	}
	return j
}

// FailFast applies spec.healthAssessment.failFast to j, the Judgement of a workload
// entry whose diagnosis is terminal or not (docs/design.md, "Diagnosis"): a Progressing
// entry with a terminal diagnosis is Degraded at once, and its decider's cause becomes
// CauseFailedFast (the failing rule still gives the message). An entry the deadline made
// Degraded meanwhile keeps the cause FailedFast too while its diagnosis is terminal, so
// the cause does not change when the deadline passes. Any other Judgement (Healthy,
// Unknown, a rule's own terminal failure) is returned as it is. j.DecidedBy is not
// modified; the result has a new Decider.
func FailFast(j Judgement, terminal bool) Judgement {
	deadline := j.State == v1alpha1.StateDegraded && j.DecidedBy != nil && j.DecidedBy.Cause == CauseDeadlinePassed
	if !terminal || (j.State != v1alpha1.StateProgressing && !deadline) || j.DecidedBy == nil {
		return j
	}
	d := *j.DecidedBy
	d.Cause = CauseFailedFast
	j.State, j.DecidedBy = v1alpha1.StateDegraded, &d
	return j
}
