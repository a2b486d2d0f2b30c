package healthloop

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// observed is an entry observation for decide's tables: ConfigMap ns/name of wave 0 at
// render r1, with the engine's result res, the prior state and firstUnhealthy.
func observed(name string, res health.Result, state v1alpha1.HealthState, anchor *time.Time) entryObservation {
	e := v1alpha1.InventoryEntry{Kind: "ConfigMap", Namespace: "ns", Name: name, Version: "v1", Resource: "configmaps", RenderRef: "r1",
		AssessedRenderRef: "r1", State: state}
	return entryObservation{entry: e, key: inventory.KeyOf(&e), prior: prior{state: state, firstUnhealthy: anchor, assessedRenderRef: "r1"},
		rulesApplied: 1, res: res}
}

var (
	pass = health.Result{Outcome: health.Pass, RuleIndex: -1}
	fail = health.Result{Outcome: health.Fail, Message: "not ready", RuleSet: "rs", RuleIndex: 0,
		DecidedBy: &health.Decider{Kind: "HealthRuleSet", Namespace: "ns", Name: "rs", Cause: health.CauseRuleFailed}}
	unread  = health.Result{Outcome: health.Error, Message: "object not found", RuleIndex: -1}
	minute  = time.Minute
	longAgo = t0.Add(-time.Hour)
)

// TestDecide is the table of decide, the pure half of a pass: what it reads goes in,
// the condition, the entries' states, the edges and the pending targets come out, at
// t0 and without an API server.
func TestDecide(t *testing.T) {
	t.Parallel()
	configured := func(deadline *time.Duration) *v1alpha1.Release {
		rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Generation: 1},
			Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "c"}, HealthAssessment: &v1alpha1.HealthAssessment{}}}
		if deadline != nil {
			rel.Spec.HealthAssessment.Deadline = &metav1.Duration{Duration: *deadline}
		}
		rel.Status.LastAttempted = &v1alpha1.AttemptStatus{RenderRef: "r1"}
		return rel
	}
	deleting := configured(nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	unconfigured := configured(nil)
	unconfigured.Spec.HealthAssessment = nil
	obs := func(entries ...entryObservation) *observation {
		return &observation{inv: &v1alpha1.ReleaseInventory{}, entries: entries}
	}
	cut := observed("cut", health.Result{}, v1alpha1.StateProgressing, &longAgo)
	cut.cut = true
	advanced := observed("new", pass, v1alpha1.StateHealthy, nil)
	advanced.entry.RenderRef = "r2"
	hooks := hookOutcome{finished: 1, running: []string{"migrate"}}

	type want struct {
		status  metav1.ConditionStatus // "" : no condition written
		reason  string
		message string            // a part of the condition's message
		states  map[string]string // entry → state and message
		edges   edges
		pending []string
		cut     int
	}
	cases := []struct {
		name string
		in   passInput
		want want
	}{
		{"deletion: only the hooks", passInput{rel: deleting, hooks: hooks},
			want{edges: edges{hooksFinished: 1}, pending: []string{"hook:migrate"}}},
		{"no healthAssessment", passInput{rel: unconfigured},
			want{status: metav1.ConditionTrue, reason: v1alpha1.ReasonNotConfigured, message: "spec.healthAssessment is not set"}},
		{"the cluster is unreachable", passInput{rel: configured(nil), hooks: hooks,
			assessErr: fmt.Errorf("%w: Cluster ns/c did not answer", clustercache.ErrClusterNotConnected)},
			want{status: metav1.ConditionUnknown, reason: v1alpha1.ReasonUnknown, message: "cluster not connected",
				edges: edges{hooksFinished: 1}, pending: []string{targetAssessment, "hook:migrate"}}},
		{"no inventory yet", passInput{rel: configured(nil), observed: &observation{}},
			want{status: metav1.ConditionTrue, reason: v1alpha1.ReasonHealthy, message: "0/0 healthy"}},
		{"every entry passes: the wave completes", passInput{rel: configured(nil),
			observed: obs(observed("a", pass, v1alpha1.StateProgressing, &longAgo), observed("b", pass, v1alpha1.StateHealthy, nil))},
			want{status: metav1.ConditionTrue, reason: v1alpha1.ReasonHealthy, message: "2/2 healthy",
				states: map[string]string{"a": "Healthy", "b": "Healthy"}, edges: edges{waveCompleted: true}}},
		{"healthy already: no edge", passInput{rel: configured(nil), observed: obs(observed("a", pass, v1alpha1.StateHealthy, nil))},
			want{status: metav1.ConditionTrue, reason: v1alpha1.ReasonHealthy, states: map[string]string{"a": "Healthy"}}},
		{"a failing entry within the deadline", passInput{rel: configured(&minute), observed: obs(observed("a", fail, v1alpha1.StateHealthy, nil))},
			want{status: metav1.ConditionFalse, reason: v1alpha1.ReasonProgressing, message: "ConfigMap ns/a: not ready",
				states: map[string]string{"a": "Progressing not ready"}, pending: []string{"object:ConfigMap ns/a"}}},
		{"a failing entry past the deadline", passInput{rel: configured(&minute), observed: obs(observed("a", fail, v1alpha1.StateProgressing, &longAgo))},
			want{status: metav1.ConditionFalse, reason: v1alpha1.ReasonDegraded, message: "ConfigMap ns/a: not ready",
				states: map[string]string{"a": "Degraded not ready"}, pending: []string{"object:ConfigMap ns/a"}}},
		{"an object that cannot be read", passInput{rel: configured(&minute), observed: obs(observed("a", unread, v1alpha1.StateHealthy, nil))},
			want{status: metav1.ConditionUnknown, reason: v1alpha1.ReasonUnknown, message: "object not found",
				states: map[string]string{"a": "Unknown object not found"}, pending: []string{"object:ConfigMap ns/a"}}},
		{"cut by the budget", passInput{rel: configured(nil), budget: 7, observed: obs(cut, observed("a", pass, v1alpha1.StateHealthy, nil))},
			want{status: metav1.ConditionUnknown, reason: v1alpha1.ReasonUnknown, message: "budget of 7 CEL cost units",
				states: map[string]string{"cut": "Unknown " + budgetMessage(7), "a": "Healthy"}, pending: []string{"object:ConfigMap ns/cut"}, cut: 1}},
		{"a new render assessed", passInput{rel: configured(nil), observed: obs(advanced)},
			want{status: metav1.ConditionUnknown, reason: v1alpha1.ReasonPending, message: `waiting for render "r1"`,
				states: map[string]string{"new": "Healthy"}, edges: edges{renderAdvanced: true}, pending: []string{targetRenderPending}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.now = t0
			got := decide(c.in)
			switch {
			case c.want.status == "" && got.hs != nil:
				t.Errorf("condition %+v, want none", *got.hs)
			case c.want.status != "" && got.hs == nil:
				t.Errorf("no condition, want %s %s", c.want.status, c.want.reason)
			case got.hs != nil && (got.hs.status != c.want.status || got.hs.reason != c.want.reason || !strings.Contains(got.hs.message, c.want.message)):
				t.Errorf("condition %s %s %q, want %s %s containing %q", got.hs.status, got.hs.reason, got.hs.message, c.want.status, c.want.reason, c.want.message)
			}
			states := map[string]string{}
			if got.a != nil {
				for _, r := range got.a.entries {
					states[r.key.Name] = strings.TrimSpace(string(r.state) + " " + r.message)
				}
				if got.a.budgetCut != c.want.cut {
					t.Errorf("budget cut %d entries, want %d", got.a.budgetCut, c.want.cut)
				}
			}
			if len(states) > 0 || len(c.want.states) > 0 {
				if fmt.Sprint(states) != fmt.Sprint(c.want.states) {
					t.Errorf("entries %v, want %v", states, c.want.states)
				}
			}
			if got.edges != c.want.edges {
				t.Errorf("edges %+v, want %+v", got.edges, c.want.edges)
			}
			if !slices.Equal(got.pending, c.want.pending) {
				t.Errorf("pending %q, want %q", got.pending, c.want.pending)
			}
			if (got.assessErr != nil) != (c.in.assessErr != nil) {
				t.Errorf("assessErr %v, want %v", got.assessErr, c.in.assessErr)
			}
		})
	}
}

// TestJudgeEntryAnchors: the firstUnhealthy anchor of an entry starts at the first pass
// that does not find it Healthy, stays while it is not, clears when it is; an entry cut
// by the budget keeps its anchor and its assessedRenderRef.
func TestJudgeEntryAnchors(t *testing.T) {
	t.Parallel()
	o := observed("a", fail, v1alpha1.StateHealthy, nil)
	if r := judgeEntry(&o, &minute, t0, 0); r.anchor == nil || !r.anchor.Equal(t0) || r.decidedBy == nil {
		t.Errorf("first failing pass: anchor %v, decidedBy %v; want t0 and the rule", r.anchor, r.decidedBy)
	}
	o = observed("a", fail, v1alpha1.StateProgressing, &longAgo)
	if r := judgeEntry(&o, &minute, t0, 0); r.anchor == nil || !r.anchor.Equal(longAgo) {
		t.Errorf("still failing: anchor %v, want it kept at %v", r.anchor, longAgo)
	}
	o = observed("a", pass, v1alpha1.StateProgressing, &longAgo)
	if r := judgeEntry(&o, &minute, t0, 0); r.anchor != nil || r.message != "" || r.decidedBy != nil {
		t.Errorf("healthy again: anchor %v, message %q, decidedBy %v; want none", r.anchor, r.message, r.decidedBy)
	}
	o = observed("a", health.Result{}, v1alpha1.StateProgressing, &longAgo)
	o.cut, o.entry.RenderRef = true, "r2"
	if r := judgeEntry(&o, &minute, t0, 3); !r.cut || r.anchor != &longAgo || r.entry.RenderRef != "r1" || r.message != budgetMessage(3) {
		t.Errorf("cut: %+v; want the anchor and the assessed render kept, and the budget's message", r)
	}
}

// TestDecideNeedsNoMemory: decide reads nothing but its input: the same input twice
// gives the same result, and budgetCutBefore is carried to the assessment (the Event of
// a cut is recorded only on its edge).
func TestDecideNeedsNoMemory(t *testing.T) {
	t.Parallel()
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"},
		Spec: v1alpha1.ReleaseSpec{HealthAssessment: &v1alpha1.HealthAssessment{}}}
	cut := observed("cut", health.Result{}, v1alpha1.StateHealthy, nil)
	cut.cut = true
	in := passInput{rel: rel, observed: &observation{inv: &v1alpha1.ReleaseInventory{}, entries: []entryObservation{cut}}, budgetCutBefore: true, now: t0}
	a, b := decide(in), decide(in)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two decisions of one input differ:\n%+v\n%+v", a, b)
	}
	if !a.a.budgetCutBefore || a.a.budgetCut != 1 {
		t.Errorf("budget cut %d, before %v; want 1 and true", a.a.budgetCut, a.a.budgetCutBefore)
	}
	if err := errors.New("x"); decide(passInput{rel: rel, assessErr: err}).assessErr != err {
		t.Error("the assessment's error is not carried to the result")
	}
}
