package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// TestReleaseStatusExplain: -o json names, for each entry that is not Healthy, the rule
// that decided it and why, as the observer recorded it in the inventory and /health
// answers it; the table with --explain ends with the same.
func TestReleaseStatusExplain(t *testing.T) {
	env := controlPlane(t)
	url := apiServer(t, env)
	kubeconfig := adminKubeconfig(t, env)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "explained", Namespace: "default"}}))
	must(env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: "explain-rules", Namespace: "default", Labels: map[string]string{"explain": "yes"}},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
			{APIVersion: "v1", Resources: []string{"secrets"}, RuleExpression: "true"},
			{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "object.data.ready == 'true'"},
		}},
	}))
	for name, ready := range map[string]string{"cm-degraded": "false", "cm-progressing": "false", "cm-ok": "true"} {
		must(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"ready": ready}}))
	}
	must(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-broken", Namespace: "default"}}))
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "explained"},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "explained"},
			HealthAssessment: &v1alpha1.HealthAssessment{Deadline: &metav1.Duration{Duration: 5 * time.Minute},
				LocalRuleSetSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"explain": "yes"}}}},
	}
	must(env.Client.Create(ctx, rel))
	rel.Status.LastAttempted = &v1alpha1.AttemptStatus{RenderRef: "r1"}
	must(env.Client.Status().Update(ctx, rel))
	r := &testRelease{t: t, env: env, name: "explained"}
	var recorded, assessed []*acv1alpha1.InventoryEntryApplyConfiguration
	// cm-degraded failed an hour ago, past the 5m deadline; cm-progressing a moment ago.
	since := map[string]time.Time{"cm-degraded": time.Now().Add(-time.Hour), "cm-progressing": time.Now()}
	// The observer's record: rule 1 of the set decided each entry that is not Healthy.
	cause := map[string]string{"cm-degraded": "DeadlinePassed", "cm-progressing": "RuleFailed", "cm-broken": "EvaluationError"}
	for name, state := range map[string]string{"cm-degraded": "Degraded", "cm-progressing": "Progressing", "cm-ok": "Healthy", "cm-broken": "Unknown"} {
		recorded = append(recorded, entryKey("ConfigMap", name).WithVersion("v1").WithResource("configmaps").WithWave(0).WithRenderRef("r1"))
		a := entryKey("ConfigMap", name).WithState(v1alpha1.HealthState(state)).WithAssessedRenderRef("r1").WithRulesApplied(1)
		if t, ok := since[name]; ok {
			a.WithFirstUnhealthy(metav1.NewTime(t))
		}
		if c, ok := cause[name]; ok {
			a.WithDecidedBy(acv1alpha1.EntryDecider().WithKind("HealthRuleSet").WithNamespace("default").WithName("explain-rules").
				WithRule(1).WithCause(c))
		}
		assessed = append(assessed, a)
	}
	r.apply(cmManager, recorded)
	r.apply(invManager, assessed)

	code, stdout, stderr := runCLI("release", "status", "explained", "-n", "default", "--api-url", url, "--kubeconfig", kubeconfig, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	var doc struct {
		DecidedByError string `json:"decidedByError"`
		Entries        []struct {
			Name      string          `json:"name"`
			DecidedBy *health.Decider `json:"decidedBy"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	want := map[string]string{
		"cm-degraded":    "HealthRuleSet default/explain-rules 1 DeadlinePassed",
		"cm-progressing": "HealthRuleSet default/explain-rules 1 RuleFailed",
		"cm-broken":      "HealthRuleSet default/explain-rules 1 EvaluationError",
		"cm-ok":          "-",
	}
	for _, e := range doc.Entries {
		got := "-"
		if d := e.DecidedBy; d != nil {
			got = d.Kind + " " + d.Namespace + "/" + d.Name + " " + string(rune('0'+d.Rule)) + " " + string(d.Cause)
		}
		if got != want[e.Name] {
			t.Errorf("%s: decidedBy %s, want %s", e.Name, got, want[e.Name])
		}
	}
	if len(doc.Entries) != len(want) {
		t.Errorf("%d entries, want %d:\n%s", len(doc.Entries), len(want), stdout)
	}
	if doc.DecidedByError != "" {
		t.Errorf("decidedByError = %q, want none", doc.DecidedByError)
	}
	const degradedBy = "ConfigMap default/cm-degraded: rule 1 of HealthRuleSet/default/explain-rules (DeadlinePassed)"
	if _, stdout, _ := runCLI("release", "status", "explained", "-n", "default", "--api-url", url, "--kubeconfig", kubeconfig, "--explain"); !strings.Contains(stdout, degradedBy) {
		t.Errorf("table with --explain:\n%s", stdout)
	}
	// release wait names the rule of each Degraded entry it prints.
	code, stdout, stderr = runCLI("release", "wait", "explained", "-n", "default", "--api-url", url, "--kubeconfig", kubeconfig, "--timeout", "30s")
	if code != exitDegraded || !strings.Contains(stdout, degradedBy) || strings.Contains(stdout, "cm-progressing:") {
		t.Errorf("release wait: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestReleaseStatusUnjudged: through /health, an entry that no selected rule judges is
// marked "(no rule)" in the table and counted in the header's unjudged; -o json carries
// rulesApplied for every entry.
func TestReleaseStatusUnjudged(t *testing.T) {
	env := controlPlane(t)
	url := apiServer(t, env)
	kubeconfig := adminKubeconfig(t, env)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: "unjudged-rules", Namespace: "default", Labels: map[string]string{"unjudged": "yes"}},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
			{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "true"},
		}},
	}))
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unjudged"},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"},
			HealthAssessment: &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"unjudged": "yes"}}}},
	}
	must(env.Client.Create(ctx, rel))
	rel.Status.LastAttempted = &v1alpha1.AttemptStatus{RenderRef: "r1"}
	must(env.Client.Status().Update(ctx, rel))
	r := &testRelease{t: t, env: env, name: "unjudged"}
	var recorded, assessed []*acv1alpha1.InventoryEntryApplyConfiguration
	// The observer's record: the set's one rule judges the ConfigMap, nothing the Secret.
	rules := map[string]int32{"ConfigMap": 1, "Secret": 0}
	for kind, resource := range map[string]string{"ConfigMap": "configmaps", "Secret": "secrets"} {
		recorded = append(recorded, entryKey(kind, "app").WithVersion("v1").WithResource(resource).WithWave(0).WithRenderRef("r1"))
		assessed = append(assessed, entryKey(kind, "app").WithState(v1alpha1.StateHealthy).WithAssessedRenderRef("r1").WithRulesApplied(rules[kind]))
	}
	r.apply(cmManager, recorded)
	r.apply(invManager, assessed)

	code, stdout, stderr := runCLI("release", "status", "unjudged", "-n", "default", "--api-url", url, "--kubeconfig", kubeconfig)
	const want = `Release default/unjudged  renderCurrent=true  total=2 healthy=2 progressing=0 degraded=0 unknown=0  unjudged=1

WAVE  KIND       NAMESPACE  NAME  STATE              RENDER  MESSAGE
0     ConfigMap  default    app   Healthy            r1      -
0     Secret     default    app   Healthy (no rule)  r1      -
`
	if code != exitOK || stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", code, stdout, want, stderr)
	}
	code, stdout, _ = runCLI("release", "status", "unjudged", "-n", "default", "--api-url", url, "--kubeconfig", kubeconfig, "-o", "json")
	if code != exitOK || strings.Count(stdout, `"rulesApplied": 1`) != 1 || strings.Count(stdout, `"rulesApplied": 0`) != 1 {
		t.Errorf("-o json: exit %d, want one entry with rulesApplied 1 and one with 0:\n%s", code, stdout)
	}
}
