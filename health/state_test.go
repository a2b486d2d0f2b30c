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

func TestJudge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	anchor := now.Add(-time.Hour)
	deadline := 10 * time.Minute
	rule := &health.Decider{Kind: "GlobalHealthRuleSet", Name: "defaults", Rule: 2, Cause: health.CauseRuleFailed}
	fail := health.Result{Outcome: health.Fail, Message: "0/1 ready", DecidedBy: rule}

	j := health.Judge(fail, &anchor, &deadline, now)
	if j.State != v1alpha1.StateDegraded || j.FirstUnhealthy == nil || !j.FirstUnhealthy.Equal(anchor) {
		t.Errorf("Judge past the deadline = %v %v, want Degraded with the anchor kept", j.State, j.FirstUnhealthy)
	}
	if j.DecidedBy == nil || j.DecidedBy.Cause != health.CauseDeadlinePassed || j.DecidedBy.Rule != 2 {
		t.Errorf("decidedBy = %+v, want rule 2 with cause DeadlinePassed", j.DecidedBy)
	}
	if rule.Cause != health.CauseRuleFailed {
		t.Error("Judge modified the Result's Decider")
	}
	if j := health.Judge(health.Result{Outcome: health.Pass, RuleIndex: -1, DecidedBy: rule}, &anchor, &deadline, now); j.State != v1alpha1.StateHealthy || j.FirstUnhealthy != nil || j.DecidedBy != nil {
		t.Errorf("Judge of a pass = %+v, want Healthy, no anchor, no decidedBy", j)
	}
}

func TestCompareEntries(t *testing.T) {
	t.Parallel()
	// Wave first, then each key as a whole string: group "a" before "a.b" (a formatted
	// "Kind.group" key would put "a.b" first, '.' sorting before '/').
	ordered := []health.EntryPosition{
		{Wave: -1, Group: "z", Kind: "Z", Name: "z"},
		{Wave: 0, Kind: "ConfigMap", Namespace: "b", Name: "a"},
		{Wave: 0, Group: "a", Kind: "X", Name: "n"},
		{Wave: 0, Group: "a.b", Kind: "A", Name: "n"},
		{Wave: 0, Group: "a.b", Kind: "B", Namespace: "", Name: "n"},
		{Wave: 0, Group: "a.b", Kind: "B", Namespace: "ns", Name: "m"},
		{Wave: 0, Group: "a.b", Kind: "B", Namespace: "ns", Name: "n"},
		{Wave: 3, Kind: "Secret", Namespace: "a", Name: "a"},
	}
	for i := range ordered {
		for j := range ordered {
			want := cmpInt(i, j)
			if got := health.CompareEntries(ordered[i], ordered[j]); got != want {
				t.Errorf("CompareEntries(%v, %v) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
