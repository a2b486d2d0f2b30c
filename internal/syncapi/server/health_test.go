package server_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"testing"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// healthJSON is the /health body decoded generically, to check the field names.
type healthJSON struct {
	Release       string           `json:"release"`
	RenderCurrent bool             `json:"renderCurrent"`
	Summary       map[string]any   `json:"summary"`
	Entries       []map[string]any `json:"entries"`
	Hooks         []map[string]any `json:"hooks"`
	// DecidedByError is "" when every entry that is not Healthy was explained.
	DecidedByError string `json:"decidedByError"`
}

func getHealth(t *testing.T, url string) (healthJSON, []byte) {
	t.Helper()
	code, hdr, body := do(t, http.MethodGet, url)
	if code != http.StatusOK {
		t.Fatalf("GET health = %d %s, want 200", code, body)
	}
	mustContain(t, "Content-Type", hdr.Get("Content-Type"), "application/json")
	var h healthJSON
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	// The body is exactly the HealthResult's JSON and a newline: no apiVersion or kind
	// from the generic server's serializer, fields in the struct's order.
	var typed syncapi.HealthResult
	if err := json.Unmarshal(body, &typed); err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(typed); string(again)+"\n" != string(body) {
		t.Errorf("body is not the HealthResult's JSON:\n got %s\nwant %s", body, again)
	}
	return h, body
}

func keysOf(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// entryIDs lists the entries as "wave group/kind namespace/name state".
func entryIDs(entries []map[string]any) []string {
	var ids []string
	for _, e := range entries {
		ids = append(ids, jsonString(e["wave"])+" "+jsonString(e["group"])+"/"+jsonString(e["kind"])+" "+
			jsonString(e["namespace"])+"/"+jsonString(e["name"])+" "+jsonString(e["state"]))
	}
	return ids
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	return string(b)
}

func TestHealthFromInventory(t *testing.T) {
	t.Parallel()
	const name = "health-demo"
	createRelease(t, name, "r2", nil)
	cm := func(group, kind, ns, n, version, resource string, wave int32, renderRef string) *acv1alpha1.InventoryEntryApplyConfiguration {
		return entry(group, kind, ns, n).WithVersion(version).WithResource(resource).WithWave(wave).WithRenderRef(renderRef)
	}
	mustApply(t, cmManager, name, []*acv1alpha1.InventoryEntryApplyConfiguration{
		cm("apps", "Deployment", "demo", "web", "v1", "deployments", 1, "r2"),
		cm("", "Service", "demo", "web", "v1", "services", 1, "r2"),
		cm("", "ConfigMap", "demo", "cfg", "v1", "configmaps", 0, "r2"),
		cm("rbac.authorization.k8s.io", "ClusterRole", "", "reader", "v1", "clusterroles", 0, "r2"),
		cm("", "Secret", "demo", "fresh", "v1", "secrets", 2, "r2"),
	},
		acv1alpha1.HookEntry().WithName("pre").WithWorkloadKind("Job").WithNamespace("demo").WithWorkloadName("pre-1").
			WithCreatedAt(*at(t, "2026-01-02T03:00:00Z")).WithTimeout("5m"),
		acv1alpha1.HookEntry().WithName("post").WithWorkloadKind("Pod").WithNamespace("demo").WithWorkloadName("post-1").
			WithCreatedAt(*at(t, "2026-01-02T03:00:00Z")))
	mustApply(t, invManager, name, []*acv1alpha1.InventoryEntryApplyConfiguration{
		assessed("apps", "Deployment", "demo", "web", v1alpha1.StateProgressing, "r2", "1/3 available", at(t, "2026-01-02T03:04:05Z")).
			WithRulesApplied(2).WithDecidedBy(acv1alpha1.EntryDecider().WithKind("GlobalHealthRuleSet").WithNamespace("").
			WithName("convoy-defaults").WithRule(3).WithCause("RuleFailed")).
			WithDiagnosis("Pod demo/web-7b9c-x: container app waiting: CrashLoopBackOff, 4 restarts"),
		assessed("", "Service", "demo", "web", v1alpha1.StateDegraded, "r2", "no endpoints", at(t, "2026-01-02T02:00:00Z")).
			WithRulesApplied(1).WithDecidedBy(acv1alpha1.EntryDecider().WithKind("HealthRuleSet").WithNamespace("demo").
			WithName("services").WithRule(0).WithCause("DeadlinePassed")),
		assessed("", "ConfigMap", "demo", "cfg", v1alpha1.StateHealthy, "r2", "", nil).WithRulesApplied(1),
		assessed("rbac.authorization.k8s.io", "ClusterRole", "", "reader", v1alpha1.StateHealthy, "r2", "", nil).WithRulesApplied(0),
	})
	mustApply(t, hookManager, name, nil,
		acv1alpha1.HookEntry().WithName("pre").WithState(v1alpha1.HookSucceeded).WithFinishedAt(*at(t, "2026-01-02T03:01:00Z")),
		acv1alpha1.HookEntry().WithName("post").WithState(v1alpha1.HookRunning).WithMessage("waiting"))

	srv, _ := newServer(t, nil)
	url := srv.URL + syncapi.HealthPath("default", name)
	h, body := getHealth(t, url)

	if h.Release != "default/"+name || !h.RenderCurrent {
		t.Errorf("release, renderCurrent = %q, %v, want default/%s, true", h.Release, h.RenderCurrent, name)
	}
	wantSummary := map[string]any{"total": 5.0, "healthy": 2.0, "progressing": 1.0, "degraded": 1.0, "unknown": 1.0}
	if !reflect.DeepEqual(h.Summary, wantSummary) {
		t.Errorf("summary = %v, want %v", h.Summary, wantSummary)
	}
	wantIDs := []string{
		`0 /ConfigMap demo/cfg Healthy`,
		`0 rbac.authorization.k8s.io/ClusterRole /reader Healthy`,
		`1 /Service demo/web Degraded`,
		`1 apps/Deployment demo/web Progressing`,
		`2 /Secret demo/fresh `,
	}
	if got := entryIDs(h.Entries); !reflect.DeepEqual(got, wantIDs) {
		t.Errorf("entries = %q, want %q\n%s", got, wantIDs, body)
	}
	wantKeys := []string{"assessedRenderRef", "decidedBy", "diagnosis", "firstUnhealthy", "group", "kind", "message", "name", "namespace", "renderRef", "rulesApplied", "state", "version", "wave"}
	for _, e := range h.Entries {
		if got := keysOf(e); !reflect.DeepEqual(got, wantKeys) {
			t.Errorf("entry %v has fields %v, want %v", e["name"], got, wantKeys)
		}
	}
	wantDeployment := map[string]any{
		"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "demo", "name": "web", "wave": 1.0,
		"state": "Progressing", "message": "1/3 available", "firstUnhealthy": "2026-01-02T03:04:05Z",
		"renderRef": "r2", "assessedRenderRef": "r2", // decidedBy and rulesApplied: as the observer recorded them
		"decidedBy":    map[string]any{"kind": "GlobalHealthRuleSet", "namespace": "", "name": "convoy-defaults", "rule": 3.0, "cause": "RuleFailed"},
		"rulesApplied": 2.0,
		"diagnosis":    "Pod demo/web-7b9c-x: container app waiting: CrashLoopBackOff, 4 restarts",
	}
	if !reflect.DeepEqual(h.Entries[3], wantDeployment) {
		t.Errorf("deployment entry = %v, want %v", h.Entries[3], wantDeployment)
	}
	wantService := map[string]any{"kind": "HealthRuleSet", "namespace": "demo", "name": "services", "rule": 0.0, "cause": "DeadlinePassed"}
	if !reflect.DeepEqual(h.Entries[2]["decidedBy"], wantService) || h.Entries[2]["rulesApplied"] != 1.0 {
		t.Errorf("service entry = %v, want decidedBy %v and rulesApplied 1", h.Entries[2], wantService)
	}
	// Healthy: no decidedBy, the recorded count (0: nothing judged it); not assessed: null.
	for i, want := range []any{1.0, 0.0} { // the ConfigMap, the ClusterRole
		if h.Entries[i]["decidedBy"] != nil || h.Entries[i]["rulesApplied"] != want {
			t.Errorf("entry %d = %v, want no decidedBy and rulesApplied %v", i, h.Entries[i], want)
		}
	}
	if e := h.Entries[4]; e["decidedBy"] != nil || e["rulesApplied"] != nil {
		t.Errorf("unassessed entry = %v, want null decidedBy and rulesApplied", e)
	}
	if h.DecidedByError != "" {
		t.Errorf("decidedByError = %q, want none: every assessed entry has its recorded fields", h.DecidedByError)
	}
	if h.Entries[0]["firstUnhealthy"] != nil || h.Entries[4]["assessedRenderRef"] != "" {
		t.Errorf("unset fields: %v, %v", h.Entries[0], h.Entries[4])
	}
	wantHooks := []map[string]any{
		{"name": "post", "workloadKind": "Pod", "namespace": "demo", "workloadName": "post-1", "createdAt": "2026-01-02T03:00:00Z",
			"timeout": "", "state": "Running", "message": "waiting", "finishedAt": nil},
		{"name": "pre", "workloadKind": "Job", "namespace": "demo", "workloadName": "pre-1", "createdAt": "2026-01-02T03:00:00Z",
			"timeout": "5m", "state": "Succeeded", "message": "", "finishedAt": "2026-01-02T03:01:00Z"},
	}
	if !reflect.DeepEqual(h.Hooks, wantHooks) {
		t.Errorf("hooks = %v, want %v", h.Hooks, wantHooks)
	}

	// The controller-manager applies a new render: the Service and the hook pre are gone
	// from its apply, the Deployment moved to r3. The observer still owns fields of the
	// Service and of pre, so they stay in the object but must vanish from /health.
	mustApply(t, cmManager, name, []*acv1alpha1.InventoryEntryApplyConfiguration{
		cm("apps", "Deployment", "demo", "web", "v1", "deployments", 1, "r3"),
		cm("", "ConfigMap", "demo", "cfg", "v1", "configmaps", 0, "r2"),
		cm("rbac.authorization.k8s.io", "ClusterRole", "", "reader", "v1", "clusterroles", 0, "r2"),
		cm("", "Secret", "demo", "fresh", "v1", "secrets", 2, "r2"),
	},
		acv1alpha1.HookEntry().WithName("post").WithWorkloadKind("Pod").WithNamespace("demo").WithWorkloadName("post-1").
			WithCreatedAt(*at(t, "2026-01-02T03:00:00Z")))
	raw := getInventoryJSON(t, name)
	mustContain(t, "inventory", raw, `"kind":"Service"`)
	mustContain(t, "inventory", raw, `"name":"pre"`)

	h, body = getHealth(t, url)
	if h.RenderCurrent {
		t.Error("renderCurrent = true with the Deployment at r3 and lastAttempted r2")
	}
	wantSummary = map[string]any{"total": 4.0, "healthy": 2.0, "progressing": 1.0, "degraded": 0.0, "unknown": 1.0}
	if !reflect.DeepEqual(h.Summary, wantSummary) {
		t.Errorf("summary after the drop = %v, want %v", h.Summary, wantSummary)
	}
	wantIDs = []string{
		`0 /ConfigMap demo/cfg Healthy`,
		`0 rbac.authorization.k8s.io/ClusterRole /reader Healthy`,
		`1 apps/Deployment demo/web Progressing`,
		`2 /Secret demo/fresh `,
	}
	if got := entryIDs(h.Entries); !reflect.DeepEqual(got, wantIDs) {
		t.Errorf("entries after the drop = %q, want %q\n%s", got, wantIDs, body)
	}
	if len(h.Hooks) != 1 || h.Hooks[0]["name"] != "post" {
		t.Errorf("hooks after the drop = %v, want only post", h.Hooks)
	}
	if h.Entries[2]["renderRef"] != "r3" || h.Entries[2]["assessedRenderRef"] != "r2" {
		t.Errorf("deployment after the new render = %v", h.Entries[2])
	}
}

func TestHealthWithoutInventory(t *testing.T) {
	t.Parallel()
	createRelease(t, "health-empty", "r1", nil)
	srv, _ := newServer(t, nil)
	h, body := getHealth(t, srv.URL+syncapi.HealthPath("default", "health-empty"))
	want := `{"release":"default/health-empty","renderCurrent":true,"summary":{"total":0,"healthy":0,"progressing":0,"degraded":0,"unknown":0},"entries":[],"hooks":[],"decidedByError":""}` + "\n"
	if string(body) != want {
		t.Errorf("body = %s, want %s", body, want)
	}
	if h.Entries == nil || h.Hooks == nil {
		t.Error("entries or hooks is null, want []")
	}
}

func TestHealthErrors(t *testing.T) {
	t.Parallel()
	createRelease(t, "health-errors", "", nil)
	srv, _ := newServer(t, nil)
	cases := []struct {
		name, method, path string
		code               int
		allow, message     string
	}{
		{"missing release", http.MethodGet, syncapi.HealthPath("default", "nope"), http.StatusNotFound, "", "release default/nope not found"},
		{"POST on health", http.MethodPost, syncapi.HealthPath("default", "health-errors"), http.StatusMethodNotAllowed, "", "does not allow this method"},
		{"unknown subresource", http.MethodGet, syncapi.ReleasePath("default", "health-errors", "status"), http.StatusNotFound, "", "could not find"},
		{"unknown path", http.MethodGet, "/apis/other.example.com/v1", http.StatusNotFound, "", ""},
		{"too deep", http.MethodGet, syncapi.HealthPath("default", "health-errors") + "/x", http.StatusNotFound, "", "could not find"},
		{"invalid name", http.MethodGet, syncapi.HealthPath("default", "Not_A_Name"), http.StatusBadRequest, "", `invalid release name "Not_A_Name"`},
		{"escaped slash", http.MethodGet, syncapi.HealthPath("default", "a/b"), http.StatusNotFound, "", "could not find"},
		{"empty namespace", http.MethodGet, syncapi.HealthPath("", "health-errors"), http.StatusBadRequest, "", "invalid namespace"},
		{"escaped dots", http.MethodGet, syncapi.PathPrefix + "/namespaces/default/releases/%2E%2E/health", http.StatusBadRequest, "", `invalid release name ".."`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := do(t, tc.method, srv.URL+tc.path)
			if code != tc.code {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, code, body, tc.code)
			}
			if hdr.Get("Allow") != tc.allow {
				t.Errorf("Allow = %q, want %q", hdr.Get("Allow"), tc.allow)
			}
			if tc.message != "" { // else the generic server's list of paths
				mustContain(t, "message", decodeStatus(t, body).Message, tc.message)
			}
		})
	}
}

// TestDiscovery: the probes are convoy-api's (package apiserver's tests).
func TestDiscovery(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, nil)
	code, _, body := do(t, http.MethodGet, srv.URL+syncapi.PathPrefix)
	if code != http.StatusOK {
		t.Fatalf("discovery = %d %s", code, body)
	}
	mustContain(t, "discovery", string(body), `"groupVersion":"subresources.convoy.kumodo.io/v1alpha1"`)
	mustContain(t, "discovery", string(body), `"name":"releases/health"`)
}
