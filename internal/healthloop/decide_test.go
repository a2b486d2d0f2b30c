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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	unread = health.Result{Outcome: health.Error, Message: "object not found", RuleIndex: -1}
	// terminal is a Fail whose rule's failedExpression returned true.
	terminal = health.Result{Outcome: health.Fail, Message: "crash loop", RuleSet: "rs", RuleIndex: 1, Terminal: true,
		DecidedBy: &health.Decider{Kind: "HealthRuleSet", Namespace: "ns", Name: "rs", Rule: 1, Cause: health.CauseFailed}}
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
	// Two hooks: migrate's Job still runs, seed's just completed.
	hooks := &hookObservation{own: &inventory.Ownership{}, hooks: []v1alpha1.HookEntry{
		hookEntry("migrate", "Job", v1alpha1.HookRunning, t0.Add(-time.Minute), nil),
		hookEntry("seed", "Job", v1alpha1.HookRunning, t0.Add(-time.Minute), nil),
	}, reads: map[int]workloadRead{0: {obj: jobWith(""), at: t0}, 1: {obj: jobWith("Complete"), at: t0}}}

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
		{"a terminal failure: Degraded at once", passInput{rel: configured(&minute), observed: obs(observed("a", terminal, v1alpha1.StateHealthy, nil))},
			want{status: metav1.ConditionFalse, reason: v1alpha1.ReasonDegraded, message: "ConfigMap ns/a: crash loop",
				states: map[string]string{"a": "Degraded crash loop"}, pending: []string{"object:ConfigMap ns/a"}}},
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
	if r := judgeEntry(&o, &minute, false, t0, 0); r.anchor == nil || !r.anchor.Equal(t0) || r.decidedBy == nil {
		t.Errorf("first failing pass: anchor %v, decidedBy %v; want t0 and the rule", r.anchor, r.decidedBy)
	}
	o = observed("a", fail, v1alpha1.StateProgressing, &longAgo)
	if r := judgeEntry(&o, &minute, false, t0, 0); r.anchor == nil || !r.anchor.Equal(longAgo) {
		t.Errorf("still failing: anchor %v, want it kept at %v", r.anchor, longAgo)
	}
	o = observed("a", pass, v1alpha1.StateProgressing, &longAgo)
	if r := judgeEntry(&o, &minute, false, t0, 0); r.anchor != nil || r.message != "" || r.decidedBy != nil {
		t.Errorf("healthy again: anchor %v, message %q, decidedBy %v; want none", r.anchor, r.message, r.decidedBy)
	}
	o = observed("a", terminal, v1alpha1.StateHealthy, nil)
	if r := judgeEntry(&o, &minute, false, t0, 0); r.state != v1alpha1.StateDegraded || r.anchor == nil || !r.anchor.Equal(t0) ||
		r.decidedBy == nil || r.decidedBy.Cause != health.CauseFailed {
		t.Errorf("terminal failure: %s, anchor %v, decidedBy %+v; want Degraded at once, anchored at t0, cause Failed", r.state, r.anchor, r.decidedBy)
	}
	o = observed("a", health.Result{}, v1alpha1.StateProgressing, &longAgo)
	o.cut, o.entry.RenderRef = true, "r2"
	if r := judgeEntry(&o, &minute, false, t0, 3); !r.cut || r.anchor != &longAgo || r.entry.RenderRef != "r1" || r.message != budgetMessage(3) {
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

// hookEntry is a recorded hook of workload kind ns/<name>-w, armed at created.
func hookEntry(name, kind string, state v1alpha1.HookState, created time.Time, finished *time.Time) v1alpha1.HookEntry {
	hk := v1alpha1.HookEntry{Name: name, WorkloadKind: kind, Namespace: "ns", WorkloadName: name + "-w", State: state,
		CreatedAt: &metav1.Time{Time: created}}
	if finished != nil {
		hk.FinishedAt = &metav1.Time{Time: *finished}
	}
	return hk
}

// jobWith is a Job whose condition cond ("Complete", "Failed"; "" for none) is True.
func jobWith(cond string) *unstructured.Unstructured {
	job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job"}}
	if cond != "" {
		_ = unstructured.SetNestedSlice(job.Object, []any{map[string]any{"type": cond, "status": "True", "reason": "R", "message": "m"}}, "status", "conditions")
	}
	return job
}

// TestDecideHooks is the table of decideHooks: the state of one polled hook from the
// read of its workload, at t0.
func TestDecideHooks(t *testing.T) {
	t.Parallel()
	armed := t0.Add(-time.Minute)
	before := t0.Add(-30 * time.Second)
	readAt := t0.Add(1500 * time.Millisecond)
	cases := []struct {
		name     string
		hook     v1alpha1.HookEntry
		read     *workloadRead // nil: not read
		unread   error
		state    v1alpha1.HookState
		message  string
		finished bool // finishedAt set (to readAt's second, or t0's without a read)
		edge     bool // counted as finished in this pass
		pending  bool
		written  bool // the hooks list is written (always, here: the observer owns none of it yet)
	}{
		{"running", hookEntry("h", "Job", "", armed, nil), &workloadRead{obj: jobWith(""), at: readAt},
			nil, v1alpha1.HookRunning, "", false, false, true, true},
		{"complete", hookEntry("h", "Job", v1alpha1.HookRunning, armed, nil), &workloadRead{obj: jobWith("Complete"), at: readAt},
			nil, v1alpha1.HookSucceeded, "R: m", true, true, false, true},
		{"failed", hookEntry("h", "Job", v1alpha1.HookRunning, armed, nil), &workloadRead{obj: jobWith("Failed"), at: readAt},
			nil, v1alpha1.HookFailed, "R: m", true, true, false, true},
		{"gone before it finished", hookEntry("h", "Job", v1alpha1.HookRunning, armed, nil), &workloadRead{notFound: true, at: readAt},
			nil, v1alpha1.HookFailed, "workload not found", true, true, false, true},
		{"timed out", hookEntry("h", "Job", v1alpha1.HookRunning, t0.Add(-2*v1alpha1.DefaultHookTimeout), nil), &workloadRead{obj: jobWith(""), at: readAt},
			nil, v1alpha1.HookFailed, "timed out after", true, true, false, true},
		{"a re-armed hook runs again", hookEntry("h", "Job", v1alpha1.HookSucceeded, t0, &before), &workloadRead{obj: jobWith(""), at: readAt},
			nil, v1alpha1.HookRunning, "", false, false, true, true},
		{"unsupported kind: failed without a read", hookEntry("h", "CronJob", "", armed, nil), nil,
			nil, v1alpha1.HookFailed, "unsupported workloadKind", true, true, false, true},
		{"the cluster is not connected: kept", hookEntry("h", "Job", v1alpha1.HookRunning, armed, nil), nil,
			clustercache.ErrClusterNotConnected, v1alpha1.HookRunning, "", false, false, true, true},
		{"a read error: kept", hookEntry("h", "Pod", v1alpha1.HookRunning, armed, nil), &workloadRead{err: errors.New("boom"), at: readAt},
			nil, v1alpha1.HookRunning, "", false, false, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := &hookObservation{own: &inventory.Ownership{}, hooks: []v1alpha1.HookEntry{c.hook}, unreadable: c.unread}
			if c.read != nil {
				o.reads = map[int]workloadRead{0: *c.read}
			}
			out := decideHooks(o, t0)
			if (out.status != nil) != c.written {
				t.Fatalf("hooks written: %v, want %v", out.status != nil, c.written)
			}
			if c.written {
				got := out.status[0]
				if *got.State != c.state || !strings.HasPrefix(ptrOr(got.Message), c.message) {
					t.Errorf("state %s %q, want %s %q", *got.State, ptrOr(got.Message), c.state, c.message)
				}
				if (got.FinishedAt != nil) != c.finished {
					t.Errorf("finishedAt %v, want set: %v", got.FinishedAt, c.finished)
				}
				if c.finished {
					want := t0
					if c.read != nil {
						want = readAt.Truncate(time.Second)
					}
					if !got.FinishedAt.Time.Equal(want) {
						t.Errorf("finishedAt %v, want %v (the read's second)", got.FinishedAt.Time, want)
					}
				}
			}
			if (out.finished == 1) != c.edge || len(out.terminal) != out.finished {
				t.Errorf("finished %d, terminal %d; want an edge: %v", out.finished, len(out.terminal), c.edge)
			}
			if (len(out.pendingTargets()) == 1) != c.pending {
				t.Errorf("pending %q, want pending: %v", out.pendingTargets(), c.pending)
			}
		})
	}
	// A hook that finished in the second it was armed is polled again (needsPoll cannot
	// tell a re-arm in that second); when its workload is gone, its outcome stands.
	done := t0.Add(-time.Second)
	hk := hookEntry("h", "Job", v1alpha1.HookSucceeded, done, &done)
	hk.Message = "R: m"
	out := decideHooks(&hookObservation{own: &inventory.Ownership{}, hooks: []v1alpha1.HookEntry{hk},
		reads: map[int]workloadRead{0: {notFound: true, at: t0}}}, t0)
	if out.finished != 0 || len(out.running) != 0 || len(out.status) != 1 || *out.status[0].State != v1alpha1.HookSucceeded ||
		!out.status[0].FinishedAt.Time.Equal(done) {
		t.Errorf("a finished hook whose workload is gone did not keep its outcome: %+v", out)
	}
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
