package healthloop

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	eventsclient "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// withEvents gives f's loop a real events.k8s.io/v1 recorder on the API server, as the
// manager's GetEventRecorder does.
func (f *fixture) withEvents() {
	f.t.Helper()
	cs, err := eventsclient.NewForConfig(env.Config)
	must(f.t, err)
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs})
	ctx, cancel := context.WithCancel(context.Background())
	must(f.t, b.StartRecordingToSinkWithContext(ctx))
	f.t.Cleanup(func() { cancel(); b.Shutdown() })
	f.h.Events = b.NewRecorder(env.Scheme, "convoy-observer")
}

// events returns "Reason: note" of the Events of f's namespace about the object
// kind/name, oldest first, with the series count when there is one.
func (f *fixture) events(kind, name string) []string {
	f.t.Helper()
	var list eventsv1.EventList
	must(f.t, env.Client.List(f.ctx, &list, client.InNamespace(f.ns)))
	sort.SliceStable(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind != kind || e.Regarding.Name != name {
			continue
		}
		s := e.Reason + ": " + e.Note
		if e.Series != nil {
			s += fmt.Sprintf(" (x%d)", e.Series.Count)
		}
		out = append(out, s)
	}
	return out
}

// expectEvents waits until the Events about kind/name are exactly want (in order).
func (f *fixture) expectEvents(kind, name string, want ...string) {
	f.t.Helper()
	var got []string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if got = f.events(kind, name); strings.Join(got, "\n") == strings.Join(want, "\n") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.t.Fatalf("events of %s %s:\n%s\nwant:\n%s", kind, name, strings.Join(got, "\n"), strings.Join(want, "\n"))
}

// TestEventsOnHealthEdges: an Event per edge of the Healthy condition, none per steady
// pass; Degraded names the offending objects with their messages.
func TestEventsOnHealthEdges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.readyRelease(time.Minute, 0)
	f.configMap("a", "false")
	f.configMap("b", "true")
	f.inventory(cm("a", 0, "r1"), cm("b", 0, "r1"))
	f.lastAttempted("r1")

	f.pass() // first assessment: Progressing, not from Healthy: no Event
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	f.configMap("a", "true")
	f.pass()
	f.pass() // steady: nothing new
	f.expectEvents("Release", f.rel, "Healthy: 2/2 healthy")
	// A pass that reads the Release from a cache that lags behind the loop's own write
	// sees the old condition again: the same edge is not recorded twice.
	stale := f.getRelease()
	stale.Status.Conditions[0].Reason, stale.Status.Conditions[0].Message = v1alpha1.ReasonProgressing, "1/2 healthy"
	_, err := f.h.writeHealth(f.ctx, stale, healthStatus{status: metav1.ConditionFalse, reason: v1alpha1.ReasonProgressing, message: "1/2 healthy"})
	must(t, err)
	f.pass()
	time.Sleep(500 * time.Millisecond)
	f.expectEvents("Release", f.rel, "Healthy: 2/2 healthy")

	f.configMap("a", "false")
	f.pass()
	f.clock.Step(2 * time.Minute)
	f.pass()
	f.pass()
	f.expectEvents("Release", f.rel,
		"Healthy: 2/2 healthy",
		"Progressing: 1/2 healthy; ConfigMap "+f.ns+"/a: ready=false",
		"Degraded: 1/2 healthy; 1 Degraded: ConfigMap "+f.ns+"/a: ready=false")

	// A rule set that stops compiling names the set and the rule.
	f.configMapRules("broken", "object.data.ready ==")
	f.pass()
	f.pass()
	got := f.events("Release", f.rel)
	eventually(t, "the RulesInvalid event", func() bool { got = f.events("Release", f.rel); return len(got) == 4 })
	if !strings.HasPrefix(got[3], "RulesInvalid: assessment failed: compiling health rules: HealthRuleSet/"+f.ns+"/broken rule 0: ruleExpression") {
		t.Errorf("4th event = %q", got[3])
	}
}

// TestNoEventOnAFirstHealthyCondition: a Release whose first condition is already
// Healthy (its objects were ready before the first pass, as when the observer is
// installed over a healthy fleet) gets no Event, nor does a steady pass after it; its
// next edges do.
func TestNoEventOnAFirstHealthyCondition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.readyRelease(time.Minute, 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	f.lastAttempted("r1")

	f.passHealthy()
	f.pass()
	time.Sleep(500 * time.Millisecond)
	f.expectEvents("Release", f.rel)
	f.configMap("a", "false")
	f.pass()
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	f.configMap("a", "true")
	f.passHealthy()
	f.expectEvents("Release", f.rel, "Progressing: 0/1 healthy; ConfigMap "+f.ns+"/a: ready=false", "Healthy: 1/1 healthy")
}

// TestHealthyEventAfterAnUnseenFirstCondition: a pass whose Release cache does not show
// yet the first condition that this process wrote (Progressing) still records the
// Healthy edge that follows it.
func TestHealthyEventAfterAnUnseenFirstCondition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.readyRelease(time.Minute, 0)
	rel := f.getRelease()
	f.h.recordHealthEvents(f.ctx, rel, nil, healthStatus{status: metav1.ConditionFalse, reason: v1alpha1.ReasonProgressing, message: "0/1 healthy"}, nil)
	f.h.recordHealthEvents(f.ctx, rel, nil, healthStatus{status: metav1.ConditionTrue, reason: v1alpha1.ReasonHealthy, message: "1/1 healthy"}, nil)
	f.expectEvents("Release", f.rel, "Healthy: 1/1 healthy")
}

// TestEventReasonFromCause: the reason of an assessment failure's Event comes from its
// cause, not from its text: a rule that does not compile is RulesInvalid even when it
// quotes the text of an unreachable cluster.
func TestEventReasonFromCause(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.readyRelease(0, 0)
	f.configMapRules("quoting", "'cluster not connected' ==")
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	f.lastAttempted("r1")
	f.pass()
	f.pass()
	var got []string
	eventually(t, "one Event", func() bool { got = f.events("Release", f.rel); return len(got) > 0 })
	if !strings.HasPrefix(got[0], "RulesInvalid: assessment failed: compiling health rules: ") {
		t.Fatalf("events = %q, want RulesInvalid", got)
	}
}

// TestHookEventReasonFromCause: a Job whose own failure message reads like a timeout
// is HookFailed; only the hook's own timeout is HookTimedOut.
func TestHookEventReasonFromCause(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.release(nil, 0)
	msg := "timed out after 5m waiting for the database"
	f.job("odd", cond("FailureTarget", "", msg), cond("Failed", "", msg))
	f.hooks(hook{name: "wait", kind: "Job", workload: "odd", createdAt: t0})
	f.pass()
	f.expectEvents("Release", f.rel, "HookFailed: hook wait (Job "+f.ns+"/odd) failed: "+msg)
}

// TestEventsOfHooks: one Event per hook that finishes, by outcome.
func TestEventsOfHooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.release(nil, 0)
	f.job("ok", cond("SuccessCriteriaMet", "CompletionsReached", ""), cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods"))
	f.job("bad", cond("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"), cond("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	f.job("slow")
	f.hooks(
		hook{name: "migrate", kind: "Job", workload: "ok", createdAt: t0},
		hook{name: "seed", kind: "Job", workload: "bad", createdAt: t0},
		hook{name: "warm", kind: "Job", workload: "slow", createdAt: t0, timeout: "1m"},
	)
	f.pass()
	f.clock.Step(time.Minute)
	f.pass()
	f.pass()
	sorted := func() []string { e := f.events("Release", f.rel); sort.Strings(e); return e }
	want := []string{
		"HookFailed: hook seed (Job " + f.ns + "/bad) failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
		"HookSucceeded: hook migrate (Job " + f.ns + "/ok) succeeded: CompletionsReached: Reached expected number of succeeded pods",
		"HookTimedOut: hook warm (Job " + f.ns + "/slow) failed: timed out after 1m",
	}
	var got []string
	eventually(t, "three hook events", func() bool { got = sorted(); return strings.Join(got, "\n") == strings.Join(want, "\n") })
}

// TestClusterEventsAreBounded: when a Cluster stops answering, it gets one
// ClusterUnreachable Event and its Releases at most clusterEventBurst of theirs, however
// many Releases there are; when it answers again, one ClusterReachable.
func TestClusterEventsAreBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	// A Cluster whose kubeconfig Secret is missing cannot be reached.
	down := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "down", Namespace: f.ns},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "down-kubeconfig"}}}
	must(t, env.Client.Create(f.ctx, down))
	f.configMapRules("rules", readyRule)
	f.configMap("a", "true")
	const releases = 3 * clusterEventBurst
	for i := range releases {
		f.rel, f.key = fmt.Sprintf("app-%02d", i), fmt.Sprintf("%s/app-%02d", f.ns, i)
		rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: f.rel, Namespace: f.ns},
			Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "down"}, HealthAssessment: localRules(0)}}
		must(t, env.Client.Create(f.ctx, rel))
		f.inventory(cm("a", 0, "r1"))
		f.lastAttempted("r1")
		f.pass()
		f.pass()
		f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	}
	count := func(reason string) (onReleases, onCluster int) {
		var list eventsv1.EventList
		must(t, env.Client.List(f.ctx, &list, client.InNamespace(f.ns)))
		for _, e := range list.Items {
			if e.Reason != reason {
				continue
			}
			if e.Regarding.Kind == "Cluster" {
				onCluster++
			} else {
				onReleases++
			}
		}
		return
	}
	eventually(t, "the cluster events", func() bool { r, c := count(EventClusterUnreachable); return c == 1 && r >= clusterEventBurst })
	time.Sleep(time.Second) // let the broadcaster deliver anything else it has
	if r, c := count(EventClusterUnreachable); c != 1 || r > clusterEventBurst+1 {
		t.Errorf("%d ClusterUnreachable events on Releases and %d on the Cluster for %d Releases; want at most %d and 1",
			r, c, releases, clusterEventBurst+1)
	}
	if got := f.events("Cluster", "down"); len(got) != 1 || !strings.Contains(got[0], "cluster unreachable: ") || !strings.Contains(got[0], "down-kubeconfig") {
		t.Errorf("events of the Cluster: %q", got)
	}

	// The cluster answers again.
	kc, err := env.AdminKubeconfig()
	must(t, err)
	f.secret("down-kubeconfig", map[string][]byte{"value": kc})
	f.passHealthy()
	eventually(t, "ClusterReachable", func() bool { _, c := count(EventClusterReachable); return c == 1 })
}

// TestEventReasonsDocumented: docs/operations.md lists every Event reason in its table:
// every constant Event… of events.go, read from the source, so a new reason fails it.
func TestEventReasonsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	must(t, err)
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	must(t, err)
	var reasons []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "Event") && lit.Kind == token.STRING {
					reasons = append(reasons, strings.Trim(lit.Value, `"`))
				}
			}
		}
	}
	if len(reasons) < 11 {
		t.Fatalf("found %d Event reasons in events.go: %q", len(reasons), reasons)
	}
	for _, r := range reasons {
		if !strings.Contains(string(doc), "| `"+r+"` |") {
			t.Errorf("docs/operations.md has no row for the Event reason %s", r)
		}
	}
}

// TestMemoryOfAReplacedRelease: a Release deleted and created again under the same name
// between two passes is another Release. Its first condition, Healthy, records no Event
// (though the loop remembers a Progressing edge of the old one), and it takes the time
// of its own first assessment (not the transition time the loop remembers writing for
// an old one that was Healthy too).
func TestMemoryOfAReplacedRelease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	f.readyRelease(time.Minute, 0)
	f.configMap("a", "false")
	f.inventory(cm("a", 0, "r1"))
	f.lastAttempted("r1")
	f.pass()
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	f.configMap("a", "true")
	for step := 1; step <= 2; step++ {
		must(t, env.Client.Delete(f.ctx, f.getRelease()))
		f.release(localRules(time.Minute), 0)
		f.lastAttempted("r1")
		f.clock.Step(time.Hour)
		f.passHealthy()
		if got := f.healthy().LastTransitionTime.Time; !got.Equal(t0.Add(time.Duration(step) * time.Hour)) {
			t.Errorf("created again (%d): lastTransitionTime = %s, want %s (its first assessment)", step, got, t0.Add(time.Duration(step)*time.Hour))
		}
	}
	time.Sleep(500 * time.Millisecond)
	f.expectEvents("Release", f.rel)
}
