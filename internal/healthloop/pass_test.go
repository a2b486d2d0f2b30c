package healthloop

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

func TestMissingReleaseReturnsQuietly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res := f.pass()
	if res.RequeueAfter != 0 {
		t.Fatalf("requeue after %v for a missing Release", res.RequeueAfter)
	}
	if f.api.syncs.Load() != 0 {
		t.Fatal("a missing Release sent a sync request")
	}
}

func TestNotConfigured(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.inventory(cm("a", 0, "r1"))
	f.pass()
	f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonNotConfigured)
	if s := f.getRelease().Status.HealthSummary; s == nil || *s != (v1alpha1.HealthSummary{}) {
		t.Fatalf("healthSummary = %+v, want an empty summary", s)
	}
	if e := f.entry("a"); e.State != "" {
		t.Fatalf("entry assessed without healthAssessment: %+v", e)
	}
}

func TestShardGateSkipsForeignRelease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setShard("other")
	f.release(nil, time.Minute)
	res := f.pass()
	if res.RequeueAfter != 0 {
		t.Fatalf("foreign Release requeued after %v", res.RequeueAfter)
	}
	if len(f.getRelease().Status.Conditions) != 0 {
		t.Fatal("the loop wrote the status of a Release of another shard")
	}
	// The replica of that shard does assess it.
	f.h.Shards = newGate("other")
	f.pass()
	f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonNotConfigured)
}

func TestEmptyInventoryIsEmptyResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.pass() // no inventory at all
	c := f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
	if c.Message != "0/0 healthy" {
		t.Fatalf("message = %q", c.Message)
	}
	f.inventory() // an empty one
	f.passHealthy()
	if s := f.getRelease().Status.HealthSummary; s == nil || s.Total != 0 {
		t.Fatalf("summary = %+v", s)
	}
}

func TestAssessAndSummary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.lastAttempted("r1")
	f.configMap("a", "true")
	f.configMap("b", "false")
	f.inventory(cm("a", 0, "r1"), cm("b", 0, "r1"), cm("gone", 0, "r1"))
	f.pass()
	f.expectEntry("a", v1alpha1.StateHealthy, "")
	f.expectEntry("b", v1alpha1.StateProgressing, "ready=false")
	f.expectEntry("gone", v1alpha1.StateUnknown, "object not found")
	// Degraded > Unknown > Progressing in the condition table: here Unknown wins.
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if !strings.HasPrefix(c.Message, "1/3 healthy; ConfigMap "+f.ns+"/gone: object not found") {
		t.Fatalf("message = %q", c.Message)
	}
	want := v1alpha1.HealthSummary{Total: 3, Healthy: 1, Progressing: 1, Unknown: 1}
	if s := f.getRelease().Status.HealthSummary; s == nil || *s != want {
		t.Fatalf("summary = %+v, want %+v", s, want)
	}
	for _, name := range []string{"a", "b", "gone"} {
		if e := f.entry(name); e.AssessedRenderRef != "r1" {
			t.Errorf("%s assessedRenderRef = %q", name, e.AssessedRenderRef)
		}
	}
	f.configMap("gone", "true")
	f.configMap("b", "true")
	f.passHealthy()
}

func TestPendingWhileRenderNotCurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.lastAttempted("r2")
	f.inventory(cm("a", 0, "r1"))
	f.pass()
	f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonPending)
	f.inventory(cm("a", 0, "r2"))
	f.passHealthy()
}

func TestSelectorSemantics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A rule every ConfigMap fails, in this namespace and in another one.
	f.configMapRules("fail-all", "false")
	other := newFixture(t)
	other.configMapRules("other-ns", "false")
	f.configMap("a", "true")
	f.inventory(cm("a", 0, ""))

	// nil selectors select nothing: no rule applies, the object passes.
	f.release(&v1alpha1.HealthAssessment{}, 0)
	f.pass()
	f.expectEntry("a", v1alpha1.StateHealthy, "")

	// {} selects every HealthRuleSet of the Release's namespace, never another's.
	rel := f.getRelease()
	rel.Spec.HealthAssessment.LocalRuleSetSelector = &metav1.LabelSelector{}
	must(t, env.Client.Update(f.ctx, rel))
	f.pass()
	f.expectEntry("a", v1alpha1.StateProgressing, "ready=true")

	// A label selector that matches nothing selects nothing.
	rel = f.getRelease()
	rel.Spec.HealthAssessment.LocalRuleSetSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
	must(t, env.Client.Update(f.ctx, rel))
	f.pass()
	f.expectEntry("a", v1alpha1.StateHealthy, "")
}

func TestCompileErrorKeepsSummary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("true")
	f.passHealthy()
	before := f.getRelease().Status.HealthSummary

	f.configMapRules("broken", "object.data.(((")
	res := f.pass()
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if !strings.Contains(c.Message, "HealthRuleSet") || !strings.Contains(c.Message, "broken") {
		t.Fatalf("message does not name the broken rule set: %q", c.Message)
	}
	if after := f.getRelease().Status.HealthSummary; after == nil || *after != *before {
		t.Fatalf("summary changed on a compile error: %+v -> %+v", before, after)
	}
	if res.RequeueAfter < 2*time.Second || res.RequeueAfter >= 3*time.Second {
		t.Fatalf("a failed assessment re-checks after %v, want 2s", res.RequeueAfter)
	}
	// Fixing the rule set recovers without any other change.
	rs := &extv1alpha1.HealthRuleSet{}
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "broken"), rs))
	must(t, env.Client.Delete(f.ctx, rs))
	f.passHealthy()
}

func TestMissingClusterKeepsSummary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("false")
	f.pass()
	before := f.getRelease().Status.HealthSummary
	if before == nil || before.Progressing != 1 {
		t.Fatalf("summary = %+v", before)
	}
	cl := &v1alpha1.Cluster{}
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "target"), cl))
	must(t, env.Client.Delete(f.ctx, cl))
	f.pass()
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if !strings.Contains(c.Message, "Cluster "+f.ns+"/target not found") {
		t.Fatalf("message = %q", c.Message)
	}
	if after := f.getRelease().Status.HealthSummary; after == nil || *after != *before {
		t.Fatalf("summary not kept: %+v -> %+v", before, after)
	}
	if e := f.entry("a"); e.State != v1alpha1.StateProgressing {
		t.Fatalf("entry rewritten while the cluster is missing: %+v", e)
	}
}

func TestKubeconfigSecretErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.inventory(cm("a", 0, ""))
	cl := &v1alpha1.Cluster{}
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "target"), cl))
	cl.Spec.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: "kubeconfig"}
	must(t, env.Client.Update(f.ctx, cl))
	f.pass()
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if !strings.Contains(c.Message, "kubeconfig Secret "+f.ns+"/kubeconfig") {
		t.Fatalf("message = %q", c.Message)
	}
	f.secret("kubeconfig", map[string][]byte{"other": []byte("x")})
	f.pass()
	if c := f.healthy(); !strings.Contains(c.Message, `has no key "value"`) {
		t.Fatalf("message = %q", c.Message)
	}
	f.secret("kubeconfig", map[string][]byte{"value": []byte("{not a kubeconfig")})
	f.pass()
	if c := f.healthy(); !strings.Contains(c.Message, "parsing the kubeconfig") {
		t.Fatalf("message = %q", c.Message)
	}
	kubeconfig, err := env.AdminKubeconfig()
	must(t, err)
	f.secret("kubeconfig", map[string][]byte{"value": kubeconfig})
	f.configMap("a", "true")
	f.passHealthy()
}

func TestEntryGauges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.configMap("b", "false")
	f.inventory(cm("a", 0, ""), cm("b", 0, ""))
	f.pass()
	if got, _ := releaseSeries.entriesOf(f.ns, f.rel, v1alpha1.StateProgressing); got != 1 {
		t.Fatalf("Progressing gauge = %v, want 1", got)
	}
	if got, _ := releaseSeries.entriesOf(f.ns, f.rel, v1alpha1.StateHealthy); got != 1 {
		t.Fatalf("Healthy gauge = %v, want 1", got)
	}
	must(t, env.Client.Delete(f.ctx, f.getRelease()))
	f.pass()
	for _, state := range []v1alpha1.HealthState{v1alpha1.StateHealthy, v1alpha1.StateProgressing, v1alpha1.StateDegraded, v1alpha1.StateUnknown} {
		if _, ok := releaseSeries.entriesOf(f.ns, f.rel, state); ok {
			t.Fatalf("the %s series of a deleted Release was left behind", state)
		}
	}
}

// TestDeletedClusterOfAnotherShard: the replica of a non-default shard reports the
// Release of a Cluster deleted under it, instead of leaving a stale condition.
func TestDeletedClusterOfAnotherShard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cl := f.setShard("x")
	f.h.Shards = newGate("x")
	f.oneConfigMap("true")
	f.passHealthy()
	must(t, env.Client.Delete(f.ctx, cl))
	f.pass()
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if !strings.Contains(c.Message, "not found") {
		t.Fatalf("message = %q", c.Message)
	}
}

// TestUnservedResourceIsNamed: an entry whose resource the target does not serve says
// so, instead of "object not found".
func TestUnservedResourceIsNamed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, ""), cmEntry{version: "v1", kind: "ConfigMap", resource: "ConfigMaps", name: "b"})
	f.pass()
	f.expectEntry("a", v1alpha1.StateHealthy, "")
	e := f.entry("b")
	if e.State != v1alpha1.StateUnknown || !strings.Contains(e.Message, `does not serve ConfigMaps (version "v1", resource "ConfigMaps")`) {
		t.Fatalf("entry = %s %q", e.State, e.Message)
	}
}

// TestSteadyMultiLineMessageIsNotRewritten: a condition whose message had several lines
// (a CEL compile error) is written once, not on every pass.
func TestSteadyMultiLineMessageIsNotRewritten(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.configMapRules("broken", "object.data.ready ==")
	f.release(localRules(0), 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, ""))
	f.pass()
	f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	rv := f.getRelease().ResourceVersion
	f.pass()
	f.pass()
	if got := f.getRelease().ResourceVersion; got != rv {
		t.Fatal("an unchanged condition was written again")
	}
}

// TestUnavailableAPIServiceIsOneEntry: a 503 from one unavailable aggregated API makes
// that entry Unknown; the other entries are still assessed.
func TestUnavailableAPIServiceIsOneEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	group := f.ns + ".attack.example.com"
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1." + group},
		"spec": map[string]any{"group": group, "version": "v1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true, "service": map[string]any{"namespace": f.ns, "name": "nobody-home", "port": int64(443)}},
	}}
	must(t, env.Client.Create(f.ctx, svc))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), svc) })
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	eventually(t, "the aggregated API to answer with a status", func() bool {
		_, err := dyn.Resource(gvr).Namespace(f.ns).Get(f.ctx, "w", metav1.GetOptions{})
		var status apierrors.APIStatus
		return errors.As(err, &status) && !apierrors.IsNotFound(err)
	})
	f.inventory(cm("a", 0, ""), cmEntry{group: group, version: "v1", kind: "Widget", resource: "widgets", name: "w"})
	f.pass()
	f.expectEntry("a", v1alpha1.StateHealthy, "")
	w := f.entry("w")
	if w.State != v1alpha1.StateUnknown || !strings.HasPrefix(w.Message, "cannot read object: ") {
		t.Fatalf("entry w = %s %q", w.State, w.Message)
	}
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	if strings.HasPrefix(c.Message, "assessment failed") {
		t.Fatalf("one unavailable API failed the whole assessment: %q", c.Message)
	}
}
