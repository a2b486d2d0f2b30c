package health

import (
	"fmt"
	"github.com/go-logr/logr/funcr"
	batchv1 "k8s.io/api/batch/v1"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// A Release whose deadline is not a Go duration passes admission (type: string, no
// pattern) and then cannot be decoded by the typed client.
func TestAttackBadDeadlineString(t *testing.T) {
	f := newFixture(t)
	f.configMapRules("rules", readyRule)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "Release",
		"metadata": map[string]any{"name": "bad", "namespace": f.ns},
		"spec": map[string]any{"clusterRef": map[string]any{"name": "target"},
			"healthAssessment": map[string]any{"localRuleSetSelector": map[string]any{}, "deadline": "5 minutes"},
			"syncPolicy":       map[string]any{"interval": "1 minute"}},
	}}
	if err := env.Client.Create(f.ctx, u); err != nil {
		t.Logf("admission rejected the bad deadline (good): %v", err)
		return
	}
	t.Logf("admission ACCEPTED deadline '5 minutes'")
	// a good Release in the same namespace
	f.release(localRules(0), 0)
	var list v1alpha1.ReleaseList
	err := env.Client.List(f.ctx, &list, client.InNamespace(f.ns))
	t.Logf("typed List of Releases in the namespace: err=%v", err)
	_, err = f.h.syncHandler(f.ctx, f.ns+"/bad")
	t.Logf("pass on bad: err=%v", err)
	if err != nil {
		t.Errorf("BUG: a Release with an unparsable deadline breaks decoding: %v", err)
	}
}

// An empty or unparsable hook timeout (contract: "default 10m when empty").
func TestAttackBadHookTimeout(t *testing.T) {
	for _, tmo := range []string{"", "ten minutes"} {
		t.Run(tmo, func(t *testing.T) {
			f := newFixture(t)
			f.configMapRules("rules", readyRule)
			f.release(localRules(0), 0)
			f.configMap("a", "true")
			f.inventory(cm("a", 0, "r1"))
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "ReleaseInventory",
				"metadata": map[string]any{"name": f.rel, "namespace": f.ns},
				"hooks": []any{map[string]any{"name": "h", "workloadKind": "Job", "namespace": f.ns,
					"workloadName": "j", "createdAt": t0.Format(time.RFC3339), "timeout": tmo}},
			}}
			if err := env.Client.Apply(f.ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(cmManager+"-hooks")); err != nil {
				t.Logf("admission rejected timeout %q (good): %v", tmo, err)
				return
			}
			t.Logf("admission ACCEPTED timeout %q", tmo)
			_, err := f.h.syncHandler(f.ctx, f.key)
			t.Logf("pass err=%v", err)
			rel := f.getRelease()
			for _, c := range rel.Status.Conditions {
				t.Logf("condition %s/%s: %s", c.Status, c.Reason, c.Message)
			}
			inv := &v1alpha1.ReleaseInventory{}
			if err := env.Client.Get(f.ctx, clientKey(f.ns, f.rel), inv); err != nil {
				t.Errorf("BUG: the ReleaseInventory with hook timeout %q cannot be decoded: %v", tmo, err)
			}
		})
	}
}

// 1024 runes of a 3-byte char: must be accepted by the CRD (maxLength counts runes).
func TestAttackMultibyteMessage(t *testing.T) {
	f := newFixture(t)
	// message expression returns 2000 x '€'
	rs := `object.?data.?ready.orValue('') == 'true'`
	f.configMapRules("rules", rs)
	// replace the rule set with one that has a long multibyte message
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.convoy.kumodo.io/v1alpha1", "kind": "HealthRuleSet",
		"metadata": map[string]any{"name": "rules", "namespace": f.ns},
		"spec": map[string]any{"rules": []any{map[string]any{"apiVersion": "v1", "resources": []any{"configmaps"},
			"ruleExpression": rs, "messageExpression": "object.data.msg"}}},
	}}
	must(t, env.Client.Apply(f.ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("test"), client.ForceOwnership))
	f.release(localRules(0), 0)
	f.lastAttempted("r1")
	cmObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": f.ns},
		"data":     map[string]any{"ready": "no", "msg": strings.Repeat("€", 2000) + "\n\tline2"},
	}}
	must(t, env.Client.Apply(f.ctx, client.ApplyConfigurationFromUnstructured(cmObj), client.FieldOwner("test"), client.ForceOwnership))
	f.inventory(cm("a", 0, "r1"))
	f.pass()
	e := f.entry("a")
	if n := len([]rune(e.Message)); n != 1024 || !strings.HasSuffix(e.Message, "…") {
		t.Errorf("message has %d runes", n)
	}
	c := f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	t.Logf("cond message len=%d", len(c.Message))
}

// One Release with an unparsable interval in the namespace: does the loop (with the
// manager's cache) still assess the other, valid Release?
func TestAttackBadReleaseBlocksOthers(t *testing.T) {
	f := newFixture(t)
	f.configMapRules("rules", readyRule)
	f.release(localRules(0), 0)
	f.lastAttempted("r1")
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "Release",
		"metadata": map[string]any{"name": "bad", "namespace": f.ns},
		"spec": map[string]any{"clusterRef": map[string]any{"name": "target"},
			"syncPolicy": map[string]any{"interval": "1 minute"}},
	}}
	must(t, env.Client.Create(f.ctx, u))
	passes := startManager(t, f)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if len(f.getRelease().Status.Conditions) > 0 {
			t.Logf("good Release assessed; passes=%d", passes.get(f.key))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("BUG: the valid Release %s got no Healthy condition in 20s because another Release of its namespace has interval '1 minute' (passes=%d)", f.key, passes.get(f.key))
}

func TestAttackLiveNumbers(t *testing.T) {
	f := newFixture(t)
	raw := []byte(`{"apiVersion":"convoy.kumodo.io/v1alpha1","kind":"Release","metadata":{"name":"nums","namespace":"` + f.ns + `"},"spec":{"clusterRef":{"name":"target"},"source":{"f":1.0,"e":1e3,"g":2.5,"n":12345678901234567890}}}`)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	res := cs.Discovery().RESTClient().Post().AbsPath("/apis/convoy.kumodo.io/v1alpha1/namespaces/" + f.ns + "/releases").
		SetHeader("Content-Type", "application/json").Body(raw).Do(f.ctx)
	body, err := res.Raw()
	t.Logf("create err=%v body=%s", err, body)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("convoy.kumodo.io/v1alpha1")
	u.SetKind("Release")
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "nums"), u))
	for k, v := range u.Object["spec"].(map[string]any)["source"].(map[string]any) {
		t.Logf("live %s = %v (%T)", k, v, v)
	}
}

// Re-armed in the same second as it finished: createdAt is stored with second
// precision, so createdAt == finishedAt and the hook is never polled again.
func TestAttackReArmSameSecond(t *testing.T) {
	f := newFixture(t)
	f.release(nil, 0)
	f.job("j1", cond("SuccessCriteriaMet", "CompletionsReached", "done"), cond(batchv1.JobComplete, "CompletionsReached", "done"))
	f.hooks(hook{name: "h", kind: "Job", workload: "j1", createdAt: t0.Add(-5 * time.Second)})
	f.pass()
	f.expectHook("h", v1alpha1.HookSucceeded, "CompletionsReached: done")
	// 400ms later the controller-manager re-arms the hook with a new, running Job.
	f.clock.Step(400 * time.Millisecond)
	f.job("j2")
	f.hooks(hook{name: "h", kind: "Job", workload: "j2", createdAt: f.clock.Now()})
	f.clock.Step(time.Second)
	f.pass()
	h := f.hookEntry("h")
	t.Logf("after re-arm: state=%s workload=%s createdAt=%v finishedAt=%v", h.State, h.WorkloadName, h.CreatedAt, h.FinishedAt)
	if h.State != v1alpha1.HookRunning {
		t.Errorf("BUG: re-armed hook (new running Job j2) still reads %s %q: createdAt %v is not after finishedAt %v at second precision",
			h.State, h.Message, h.CreatedAt, h.FinishedAt)
	}
}

// An inventory entry whose API group is served by an unavailable APIService (503):
// one object of an unavailable aggregated API.
func TestAttackUnavailableAPIService(t *testing.T) {
	f := newFixture(t)
	f.configMapRules("rules", readyRule)
	f.release(localRules(0), 0)
	f.lastAttempted("r1")
	f.configMap("a", "true")
	grp := fmt.Sprintf("%s.attack.example.com", f.ns)
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1." + grp},
		"spec": map[string]any{"group": grp, "version": "v1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true, "service": map[string]any{"namespace": f.ns, "name": "nope", "port": int64(443)}},
	}}
	must(t, env.Client.Create(f.ctx, svc))
	t.Cleanup(func() { _ = env.Client.Delete(f.ctx, svc) })
	time.Sleep(2 * time.Second)
	f.inventory(cm("a", 0, "r1"), cmEntry{group: grp, version: "v1", kind: "Widget", resource: "widgets", name: "w", renderRef: "r1"})
	_, err := f.h.syncHandler(f.ctx, f.key)
	t.Logf("pass err=%v", err)
	c := f.healthy()
	t.Logf("condition %s/%s: %s", c.Status, c.Reason, c.Message)
	for _, e := range f.getInventory().Entries {
		t.Logf("entry %s %s: %s %q", e.Kind, e.Name, e.State, e.Message)
	}
	if c.Reason == v1alpha1.ReasonUnknown && strings.HasPrefix(c.Message, "assessment failed") {
		t.Errorf("BUG: one entry of an unavailable aggregated API fails the assessment of the whole Release (a, which is fine, is not assessed)")
	}
}

// A rule set that does not compile gives a multi-line CEL error; the condition
// message is collapsed to one line when written, and compared un-collapsed.
func TestAttackCompileErrorRewritesEveryPass(t *testing.T) {
	f := newFixture(t)
	f.configMapRules("rules", "object.data.ready ==")
	f.release(localRules(0), 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	var writes int
	f.h.Log = funcr.New(func(prefix, args string) {
		if strings.Contains(args, "health written") {
			writes++
		}
	}, funcr.Options{})
	for i := 0; i < 3; i++ {
		f.pass()
	}
	c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
	t.Logf("message: %q", c.Message)
	if writes != 1 {
		t.Errorf("BUG: writeHealth applied the unchanged condition %d times in 3 identical passes (want 1)", writes)
	}
}

// syncPolicy.interval of 10ms: how many passes does a steady, healthy Release get?
func TestAttackTinyInterval(t *testing.T) {
	f := newFixture(t)
	f.configMapRules("rules", readyRule)
	f.release(localRules(0), 10*time.Millisecond)
	f.lastAttempted("r1")
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	passes := startManager(t, f)
	time.Sleep(3 * time.Second)
	n := passes.get(f.key)
	t.Logf("passes in 3s of a Healthy Release with interval 10ms: %d", n)
	if n > 30 {
		t.Errorf("BUG: no floor on syncPolicy.interval: %d passes in 3s for a steady Release", n)
	}
}
