package health_test

import (
	"math"
	"testing"
	"time"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

func TestDeriveState(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { tm := now.Add(d); return &tm }
	dur := func(d time.Duration) *time.Duration { return &d }
	pass := health.Result{Outcome: health.Pass, RuleIndex: -1}
	fail := health.Result{Outcome: health.Fail, Message: "1/3 available, 1 updated"}
	errored := health.Result{Outcome: health.Error, Message: "evaluation error: no such key: status"}
	farPast := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC) // ~2000 years: beyond time.Duration

	cases := []struct {
		name       string
		result     health.Result
		anchor     *time.Time
		deadline   *time.Duration
		state      v1alpha1.HealthState
		wantAnchor *time.Time
	}{
		{"pass clears the anchor", pass, at(-time.Hour), dur(time.Minute), v1alpha1.StateHealthy, nil},
		{"pass without anchor", pass, nil, nil, v1alpha1.StateHealthy, nil},
		{"error keeps the anchor", errored, at(-time.Hour), dur(time.Minute), v1alpha1.StateUnknown, at(-time.Hour)},
		{"error without anchor sets none", errored, nil, dur(time.Minute), v1alpha1.StateUnknown, nil},
		{"unknown outcome is an error", health.Result{Outcome: 7}, at(-time.Hour), nil, v1alpha1.StateUnknown, at(-time.Hour)},
		{"first failure sets the anchor to now", fail, nil, nil, v1alpha1.StateProgressing, at(0)},
		{"first failure, deadline ahead", fail, nil, dur(5 * time.Minute), v1alpha1.StateProgressing, at(0)},
		{"first failure, zero deadline", fail, nil, dur(0), v1alpha1.StateDegraded, at(0)},
		{"no deadline stays Progressing", fail, at(-1000 * time.Hour), nil, v1alpha1.StateProgressing, at(-1000 * time.Hour)},
		{"before the deadline", fail, at(-5*time.Minute + time.Nanosecond), dur(5 * time.Minute), v1alpha1.StateProgressing, at(-5*time.Minute + time.Nanosecond)},
		{"exactly the deadline is Degraded", fail, at(-5 * time.Minute), dur(5 * time.Minute), v1alpha1.StateDegraded, at(-5 * time.Minute)},
		{"past the deadline", fail, at(-time.Hour), dur(5 * time.Minute), v1alpha1.StateDegraded, at(-time.Hour)},
		{"anchor in the future (clock skew)", fail, at(time.Hour), dur(0), v1alpha1.StateProgressing, at(time.Hour)},
		// now − farPast does not fit a Duration: Sub saturates at the maximum, which
		// equals the largest deadline, so Degraded, never a wrapped-around negative.
		{"far past anchor, largest deadline", fail, &farPast, dur(math.MaxInt64), v1alpha1.StateDegraded, &farPast},
		{"far past anchor, big deadline", fail, &farPast, dur(200 * 365 * 24 * time.Hour), v1alpha1.StateDegraded, &farPast},
		{"recent anchor, largest deadline", fail, at(-time.Hour), dur(math.MaxInt64), v1alpha1.StateProgressing, at(-time.Hour)},
		{"negative deadline", fail, at(time.Hour), dur(math.MinInt64), v1alpha1.StateDegraded, at(time.Hour)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			state, anchor := health.DeriveState(tc.result, tc.anchor, tc.deadline, now)
			if state != tc.state {
				t.Errorf("state %s, want %s", state, tc.state)
			}
			switch {
			case tc.wantAnchor == nil && anchor != nil:
				t.Errorf("anchor %v, want nil", *anchor)
			case tc.wantAnchor != nil && anchor == nil:
				t.Errorf("anchor nil, want %v", *tc.wantAnchor)
			case tc.wantAnchor != nil && !anchor.Equal(*tc.wantAnchor):
				t.Errorf("anchor %v, want %v", *anchor, *tc.wantAnchor)
			}
			if anchor != nil && anchor == tc.anchor {
				t.Errorf("returned the caller's anchor pointer")
			}
		})
	}
}

// TestExplain: the decider of a failing rule is RuleFailed while Progressing and
// DeadlinePassed once Degraded; an evaluation error stays EvaluationError; nothing
// decided a Healthy state or an unread object.
func TestExplain(t *testing.T) {
	t.Parallel()
	failed := &health.Decider{Kind: health.KindHealthRuleSet, Namespace: "ns", Name: "set", Rule: 2, Cause: health.CauseRuleFailed}
	errored := &health.Decider{Kind: health.KindGlobalHealthRuleSet, Name: "g", Rule: 0, Cause: health.CauseEvaluationError}
	fail := health.Result{Outcome: health.Fail, DecidedBy: failed, RuleIndex: 2}
	cases := []struct {
		name  string
		r     health.Result
		state v1alpha1.HealthState
		want  health.Cause // "" for nil
	}{
		{"failing, Progressing", fail, v1alpha1.StateProgressing, health.CauseRuleFailed},
		{"failing, Degraded by the deadline", fail, v1alpha1.StateDegraded, health.CauseDeadlinePassed},
		{"evaluation error", health.Result{Outcome: health.Error, DecidedBy: errored}, v1alpha1.StateUnknown, health.CauseEvaluationError},
		{"object not found", health.Result{Outcome: health.Error, Message: "object not found", RuleIndex: -1}, v1alpha1.StateUnknown, ""},
		{"pass", health.Result{Outcome: health.Pass, RuleIndex: -1}, v1alpha1.StateHealthy, ""},
	}
	for _, tc := range cases {
		got := health.Explain(tc.r, tc.state)
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: %+v, want nil", tc.name, *got)
		case tc.want != "" && (got == nil || got.Cause != tc.want || got.Name != tc.r.DecidedBy.Name || got.Rule != tc.r.DecidedBy.Rule):
			t.Errorf("%s: %+v, want %s of %+v", tc.name, got, tc.want, tc.r.DecidedBy)
		}
	}
	if failed.Cause != health.CauseRuleFailed {
		t.Errorf("Explain modified the Result's decider: %+v", *failed)
	}
}
