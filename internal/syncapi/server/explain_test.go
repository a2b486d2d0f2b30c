package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiserver "github.com/kumodo/convoy-observer/internal/syncapi/server"
)

// explainedRelease creates, in namespace default, a HealthRuleSet labelled for the test,
// the Release name on Cluster cluster with a 5m deadline selecting it, the ConfigMaps of
// objects (name → data; nil: not created) and an inventory recording every name with
// the given states, the Degraded ones failing for an hour.
func explainedRelease(t *testing.T, name, cluster string, rules []extv1alpha1.RuleSpec, objects map[string]map[string]string, states map[string]string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"explain": name}},
		Spec:       extv1alpha1.HealthRuleSetSpec{Rules: rules},
	}))
	for n, data := range objects {
		if data != nil {
			must(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + n, Namespace: "default"}, Data: data}))
		}
	}
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: cluster},
			HealthAssessment: &v1alpha1.HealthAssessment{Deadline: &metav1.Duration{Duration: 5 * time.Minute},
				LocalRuleSetSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"explain": name}}}},
	}
	must(env.Client.Create(ctx, rel))
	rel.Status.LastAttempted = &v1alpha1.AttemptStatus{RenderRef: "r1"}
	must(env.Client.Status().Update(ctx, rel))
	var recorded, judged []*acv1alpha1.InventoryEntryApplyConfiguration
	for n, state := range states {
		recorded = append(recorded, entry("", "ConfigMap", "default", name+"-"+n).
			WithVersion("v1").WithResource("configmaps").WithWave(0).WithRenderRef("r1"))
		var first *metav1.Time
		if state == "Degraded" {
			hourAgo := metav1.NewTime(time.Now().Add(-time.Hour))
			first = &hourAgo
		}
		judged = append(judged, assessed("", "ConfigMap", "default", name+"-"+n, v1alpha1.HealthState(state), "r1", "", first))
	}
	mustApply(t, cmManager, name, recorded)
	mustApply(t, invManager, name, judged)
}

// explainedHealth serves /health with x and returns, per entry name without the release
// prefix, "KIND NAMESPACE/NAME RULE CAUSE" of decidedBy or "-", and decidedByError.
func explainedHealth(t *testing.T, name string, x *syncapiserver.Explainer) (map[string]string, string) {
	t.Helper()
	h := syncapiserver.NewEndpoints(env.Client)
	h.Log, h.Explainer = logr.Discard(), x
	srv := serve(t, h)
	_, body := getHealth(t, srv.URL+syncapi.HealthPath("default", name))
	var doc struct {
		Entries []struct {
			Name      string          `json:"name"`
			DecidedBy *health.Decider `json:"decidedBy"`
		} `json:"entries"`
		DecidedByError string `json:"decidedByError"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range doc.Entries {
		got := "-"
		if d := e.DecidedBy; d != nil {
			b, _ := json.Marshal(d.Rule)
			got = d.Kind + " " + d.Namespace + "/" + d.Name + " " + string(b) + " " + string(d.Cause)
		}
		out[strings.TrimPrefix(e.Name, name+"-")] = got
	}
	return out, doc.DecidedByError
}

// TestHealthExplainsEntries: /health names the rule that decides each entry that is not
// Healthy and why, re-evaluated against the live objects of a remote cluster (the
// kubeconfig in the Cluster's Secret): RuleFailed while within the deadline,
// DeadlinePassed past it, EvaluationError; nothing for a Healthy entry, a missing
// object or one that passes now.
func TestHealthExplainsEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kc, err := env.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "explain-remote", Namespace: "default"},
		Data: map[string][]byte{"value": kc}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "explain-remote", Namespace: "default"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "explain-remote"}}}); err != nil {
		t.Fatal(err)
	}
	const name = "explain-remote"
	explainedRelease(t, name, "explain-remote", []extv1alpha1.RuleSpec{
		{APIVersion: "v1", Resources: []string{"secrets"}, RuleExpression: "false"},
		{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "object.data.ready == 'true'"},
	}, map[string]map[string]string{
		"failing": {"ready": "false"}, "late": {"ready": "false"}, "broken": {}, "recovered": {"ready": "true"}, "ok": {"ready": "true"}, "missing": nil,
	}, map[string]string{
		"failing": "Progressing", "late": "Degraded", "broken": "Unknown", "recovered": "Progressing", "ok": "Healthy", "missing": "Unknown",
	})
	got, explainErr := explainedHealth(t, name, &syncapiserver.Explainer{Reader: env.Client})
	want := map[string]string{
		"failing":   "HealthRuleSet default/" + name + " 1 RuleFailed",
		"late":      "HealthRuleSet default/" + name + " 1 DeadlinePassed",
		"broken":    "HealthRuleSet default/" + name + " 1 EvaluationError",
		"recovered": "-", "ok": "-", "missing": "-",
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: decidedBy %s, want %s", n, got[n], w)
		}
	}
	if explainErr != "" {
		t.Errorf("decidedByError = %q, want none", explainErr)
	}
	if len(got) != len(want) {
		t.Errorf("entries %v, want %d", got, len(want))
	}
}

// TestHealthExplainErrors: when entries cannot be explained, /health still answers
// and decidedByError says why.
func TestHealthExplainErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "explain-local", Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	failing := []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "false"}}
	objects := map[string]map[string]string{"a": {}, "b": {}, "c": {}}
	states := map[string]string{"a": "Progressing", "b": "Progressing", "c": "Progressing"}
	explainedRelease(t, "explain-errors", "explain-local", failing, objects, states)
	explainedRelease(t, "explain-nocluster", "no-such-cluster", failing, nil, map[string]string{"a": "Progressing"})
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "explain-nokey", Namespace: "default"},
		Data: map[string][]byte{"kubeconfig": []byte("not the key asked for")}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "explain-nokey", Namespace: "default"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "explain-nokey"}}}); err != nil {
		t.Fatal(err)
	}
	explainedRelease(t, "explain-nokey", "explain-nokey", failing, nil, map[string]string{"a": "Progressing"})
	explainedRelease(t, "explain-invalid", "explain-local", []extv1alpha1.RuleSpec{
		{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "object.data +"},
	}, nil, map[string]string{"a": "Unknown"})
	local := &syncapiserver.Explainer{Reader: env.Client, LocalConfig: env.Config}
	cases := []struct {
		name, release string
		x             *syncapiserver.Explainer
		explained     int
		err           string
	}{
		{"every entry", "explain-errors", local, 3, ""},
		{"more entries than one request explains", "explain-errors", &syncapiserver.Explainer{Reader: env.Client, LocalConfig: env.Config, MaxEntries: 2}, 2,
			"only the first 2 of the 3 entries that are not Healthy are explained"},
		{"no local cluster", "explain-errors", &syncapiserver.Explainer{Reader: env.Client}, 0, "the Cluster explain-local has no kubeconfigSecretRef"},
		{"no Cluster", "explain-nocluster", local, 0, "reading Cluster default/no-such-cluster"},
		{"no such key in the kubeconfig Secret", "explain-nokey", local, 0, `Secret default/explain-nokey of Cluster explain-nokey has no key "value"`},
		{"rules that do not compile", "explain-invalid", local, 0, "the selected rules do not compile: HealthRuleSet/default/explain-invalid rule 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, explainErr := explainedHealth(t, tc.release, tc.x)
			n := 0
			for _, d := range got {
				if d != "-" {
					n++
				}
			}
			if n != tc.explained || !strings.Contains(explainErr, tc.err) || (tc.err == "") != (explainErr == "") {
				t.Errorf("%d explained, decidedByError %q; want %d and %q", n, explainErr, tc.explained, tc.err)
			}
		})
	}
}

// TestHealthExplainBoundsEvaluation: hostile rules (255 expressions that each pass
// within the cost limit, about 30 ms of CPU apiece, 15 s in all, before one that fails) cannot make
// one /health request run past the Explainer's Timeout: the evaluation stops between
// two expressions once the timeout passed, the entries it did not finish have no
// decidedBy, and decidedByError says that the timeout cut them.
func TestHealthExplainBoundsEvaluation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "explain-slow", Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	var rules []extv1alpha1.RuleSpec
	for range 255 {
		rules = append(rules, extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps"},
			RuleExpression: "lists.range(400).all(i, lists.range(400).all(j, i >= 0))"})
	}
	rules = append(rules, extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "false"})
	objects := map[string]map[string]string{"a": {}, "b": {}}
	states := map[string]string{"a": "Progressing", "b": "Progressing"}
	explainedRelease(t, "explain-slow", "explain-slow", rules, objects, states)

	// 5 s, not less: the reads before the evaluation (the Release, its Cluster, the rule
	// sets, the objects) share the bound, and on a busy machine they alone took over 1 s.
	got, explainErr := explainedHealth(t, "explain-slow", &syncapiserver.Explainer{Reader: env.Client, LocalConfig: env.Config, Timeout: 5 * time.Second})
	for n, d := range got {
		if d != "-" {
			t.Errorf("%s: decidedBy %s, want none: its evaluation outlasts the timeout", n, d)
		}
	}
	mustContain(t, "decidedByError", explainErr, "2 entries were not evaluated within 5s")
}

// TestHealthExplainHangingTarget: a Cluster whose kubeconfig points at a server that
// accepts connections and never answers holds /health no longer than the Explainer's
// Timeout; the answer names the server that did not answer in decidedByError.
func TestHealthExplainHangingTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release := make(chan struct{})
	hung := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) })
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, hung.URL)
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "explain-hung", Namespace: "default"},
		Data: map[string][]byte{"value": []byte(kc)}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "explain-hung", Namespace: "default"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "explain-hung"}}}); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for i := range 10 {
		states[fmt.Sprint(i)] = "Progressing"
	}
	explainedRelease(t, "explain-hung", "explain-hung", []extv1alpha1.RuleSpec{
		{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "false"},
	}, nil, states)
	_, explainErr := explainedHealth(t, "explain-hung", &syncapiserver.Explainer{Reader: env.Client, Timeout: 500 * time.Millisecond})
	mustContain(t, "decidedByError", explainErr, "10 objects could not be read")
	mustContain(t, "decidedByError", explainErr, strings.TrimPrefix(hung.URL, "https://"))
}

// TestHealthExplainUsesOnlySelectedRuleSets: a HealthRuleSet of another namespace and a
// GlobalHealthRuleSet that carry the selected labels, with a rule that fails, never
// decide an entry: the Release's local selector reaches its own namespace only, and
// its absent global selector selects nothing.
func TestHealthExplainUsesOnlySelectedRuleSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "explain-foreign"
	labels := map[string]string{"explain": name}
	failing := []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "false"}}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: name, Labels: labels},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: failing}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &extv1alpha1.GlobalHealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: failing}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	explainedRelease(t, name, name, []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "true"}},
		map[string]map[string]string{"a": {}}, map[string]string{"a": "Progressing"})
	got, explainErr := explainedHealth(t, name, &syncapiserver.Explainer{Reader: env.Client, LocalConfig: env.Config})
	if got["a"] != "-" || explainErr != "" {
		t.Errorf("decidedBy %s, decidedByError %q; want none: only the Release's own namespace's set is selected, and it passes", got["a"], explainErr)
	}
}

// TestHealthExplainReusesTargetConnections: a kubeconfig whose cluster is reached
// through a proxy (proxy-url) gets a transport that client-go does not share between
// clients; a client built per request left one more idle connection to the target
// (and its goroutines) behind after each /health for 90 s. Twenty requests must not
// hold more connections than one request reads with.
func TestHealthExplainReusesTargetConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var open atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		w.WriteHeader(http.StatusOK)
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		open.Add(1)
		defer open.Add(-1)
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		_, _ = io.Copy(c, up)
	}))
	t.Cleanup(proxy.Close)
	kc, err := env.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	proxied := strings.Replace(string(kc), "    server: ", "    proxy-url: "+proxy.URL+"\n    server: ", 1)
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "explain-proxied", Namespace: "default"},
		Data: map[string][]byte{"value": []byte(proxied)}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "explain-proxied", Namespace: "default"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "explain-proxied"}}}); err != nil {
		t.Fatal(err)
	}
	explainedRelease(t, "explain-proxied", "explain-proxied", []extv1alpha1.RuleSpec{
		{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "false"},
	}, map[string]map[string]string{"a": {}, "b": {}}, map[string]string{"a": "Progressing", "b": "Progressing"})
	x := &syncapiserver.Explainer{Reader: env.Client}
	for range 20 {
		got, explainErr := explainedHealth(t, "explain-proxied", x)
		if got["a"] == "-" || explainErr != "" {
			t.Fatalf("through the proxy: decidedBy %v, decidedByError %q", got, explainErr)
		}
	}
	if n := open.Load(); n > 4 {
		t.Errorf("%d connections to the target stay open after 20 requests, want at most 4 (one request's reads)", n)
	}
}
