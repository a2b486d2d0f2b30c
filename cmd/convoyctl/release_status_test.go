package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// authRecorder serves next and remembers the last Authorization and impersonation
// headers.
type authRecorder struct {
	next   func(http.ResponseWriter, *http.Request)
	mu     sync.Mutex
	auth   string
	as     string
	groups []string
}

func (a *authRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.auth = r.Header.Get("Authorization")
	a.as, a.groups = r.Header.Get("Impersonate-User"), r.Header.Values("Impersonate-Group")
	a.mu.Unlock()
	a.next(w, r)
}

func (a *authRecorder) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.auth
}

// impersonated returns the last request's Impersonate-User and Impersonate-Group.
func (a *authRecorder) impersonated() (string, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.as, a.groups
}

// healthBody is a /health answer with entries in all states, a cluster-scoped core-less
// entry, a stale assessment and a multi-line message, two entries that no rule judges
// (one Healthy, one not assessed yet), and two hooks.
const healthBody = `{"release":"demo/shop","renderCurrent":false,
 "summary":{"total":4,"healthy":2,"progressing":1,"degraded":0,"unknown":1},
 "entries":[
  {"group":"","version":"v1","kind":"ConfigMap","namespace":"demo","name":"cfg","wave":0,"state":"Healthy","message":"","firstUnhealthy":null,"renderRef":"r2","assessedRenderRef":"r2","rulesApplied":1},
  {"group":"rbac.authorization.k8s.io","version":"v1","kind":"ClusterRole","namespace":"","name":"reader","wave":0,"state":"Healthy","message":"","firstUnhealthy":null,"renderRef":"r2","assessedRenderRef":"r2","rulesApplied":0},
  {"group":"apps","version":"v1","kind":"Deployment","namespace":"demo","name":"web","wave":1,"state":"Progressing","message":"1/3 available,\n1 updated","firstUnhealthy":"2026-01-02T03:04:05Z","renderRef":"r3","assessedRenderRef":"r2","rulesApplied":2},
  {"group":"","version":"v1","kind":"Secret","namespace":"demo","name":"fresh","wave":2,"state":"","message":"","firstUnhealthy":null,"renderRef":"r3","assessedRenderRef":"","rulesApplied":0}],
 "hooks":[
  {"name":"post","workloadKind":"Pod","namespace":"demo","workloadName":"post-1","createdAt":"2026-01-02T03:00:00Z","timeout":"","state":"Running","message":"waiting","finishedAt":null},
  {"name":"pre","workloadKind":"Job","namespace":"demo","workloadName":"pre-1","createdAt":"2026-01-02T03:00:00Z","timeout":"5m0s","state":"Succeeded","message":"","finishedAt":"2026-01-02T03:01:00Z"}]}`

// rulesAppliedField matches the rulesApplied fields of healthBody.
var rulesAppliedField = regexp.MustCompile(`,"rulesApplied":[0-9]+`)

const wantStatus = `Release demo/shop  renderCurrent=false  total=4 healthy=2 progressing=1 degraded=0 unknown=1  unjudged=2

WAVE  KIND                                   NAMESPACE  NAME    STATE              RENDER            MESSAGE
0     ConfigMap                              demo       cfg     Healthy            r2                -
0     ClusterRole.rbac.authorization.k8s.io  -          reader  Healthy (no rule)  r2                -
1     Deployment.apps                        demo       web     Progressing        r3 (assessed r2)  1/3 available, 1 updated
2     Secret                                 demo       fresh   -                  r3                -

HOOKS
NAME  KIND  NAMESPACE  WORKLOAD  STATE      CREATED               FINISHED              MESSAGE
post  Pod   demo       post-1    Running    2026-01-02T03:00:00Z  -                     waiting
pre   Job   demo       pre-1     Succeeded  2026-01-02T03:00:00Z  2026-01-02T03:01:00Z  -
`

// wantUncounted is wantStatus from a convoy-api that does not count the rules.
const wantUncounted = `Release demo/shop  renderCurrent=false  total=4 healthy=2 progressing=1 degraded=0 unknown=1

WAVE  KIND                                   NAMESPACE  NAME    STATE        RENDER            MESSAGE
0     ConfigMap                              demo       cfg     Healthy      r2                -
0     ClusterRole.rbac.authorization.k8s.io  -          reader  Healthy      r2                -
1     Deployment.apps                        demo       web     Progressing  r3 (assessed r2)  1/3 available, 1 updated
2     Secret                                 demo       fresh   -            r3                -

HOOKS
NAME  KIND  NAMESPACE  WORKLOAD  STATE      CREATED               FINISHED              MESSAGE
post  Pod   demo       post-1    Running    2026-01-02T03:00:00Z  -                     waiting
pre   Job   demo       pre-1     Succeeded  2026-01-02T03:00:00Z  2026-01-02T03:01:00Z  -
`

// healthServer answers GET …/namespaces/demo/releases/shop/health with healthBody,
// GET …/releases/empty/health with an empty result, and 404 otherwise.
func healthServer(t *testing.T) *httptest.Server {
	t.Helper()
	const prefix = "/apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/"
	srv := httptest.NewServer(&authRecorder{next: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == prefix+"demo/releases/shop/health":
			_, _ = w.Write([]byte(healthBody))
		case r.Method == http.MethodGet && r.URL.Path == prefix+"demo/releases/uncounted/health":
			// A convoy-api that does not count the rules (rulesApplied null or absent).
			_, _ = w.Write([]byte(rulesAppliedField.ReplaceAllString(healthBody, "")))
		case r.Method == http.MethodGet && r.URL.Path == prefix+"default/releases/empty/health":
			_, _ = w.Write([]byte(`{"release":"default/empty","renderCurrent":true,"summary":{"total":0,"healthy":0,"progressing":0,"degraded":0,"unknown":0},"entries":[],"hooks":[]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"release default/nope not found","reason":"NotFound","code":404}`))
		}
	}})
	t.Cleanup(srv.Close)
	return srv
}

// kubeconfigFor writes a kubeconfig whose server is url, with namespace in its context
// when not empty, and a bearer token.
func kubeconfigFor(t *testing.T, url, namespace string) string {
	t.Helper()
	ns := ""
	if namespace != "" {
		ns = "\n    namespace: " + namespace
	}
	return writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: `+url+`
users:
- name: u
  user:
    token: t0ken
contexts:
- name: ctx
  context:
    cluster: c
    user: u`+ns+`
current-context: ctx
`)
}

func TestReleaseStatus(t *testing.T) {
	t.Parallel()
	srv := healthServer(t)
	// Through the kubeconfig's server (the kube-apiserver), in the context's namespace.
	assertRun(t, []string{"release", "status", "shop", "--kubeconfig", kubeconfigFor(t, srv.URL, "demo")}, exitOK, wantStatus, "")
	// Without rulesApplied, nothing is marked and nothing counted: unknown is not 0.
	assertRun(t, []string{"release", "status", "uncounted", "--kubeconfig", kubeconfigFor(t, srv.URL, "demo")}, exitOK, wantUncounted, "")
	// -n wins over the context's namespace.
	assertRun(t, []string{"release", "status", "empty", "-n", "default", "--kubeconfig", kubeconfigFor(t, srv.URL, "demo")}, exitOK,
		"Release default/empty  renderCurrent=true  total=0 healthy=0 progressing=0 degraded=0 unknown=0\n\nNo inventory entries.\n", "")
	// A direct URL, with the kubeconfig's credentials (client-go loads them only for an
	// https server, which is never contacted here); without a namespace: default.
	elsewhere := kubeconfigFor(t, "https://127.0.0.1:1", "")
	assertRun(t, []string{"release", "status", "shop", "-n", "demo", "--kubeconfig", elsewhere, "--api-url", srv.URL}, exitOK, wantStatus, "")
	assertRun(t, []string{"release", "status", "--kubeconfig", elsewhere, "--api-url", srv.URL + "/", "empty"}, exitOK,
		"Release default/empty  renderCurrent=true  total=0 healthy=0 progressing=0 degraded=0 unknown=0\n\nNo inventory entries.\n", "")
	if got := srv.Config.Handler.(*authRecorder).last(); got != "Bearer t0ken" {
		t.Errorf("Authorization = %q, want the kubeconfig's token", got)
	}
	// kubectl's connection flags: impersonation and a token that replaces the
	// kubeconfig's (an https server again, for the credentials).
	assertRun(t, []string{"release", "status", "shop", "-n", "demo", "--kubeconfig", elsewhere, "--api-url", srv.URL,
		"--as", "alice", "--as-group", "team-a", "--as-group", "system:authenticated", "--token", "other"}, exitOK, wantStatus, "")
	rec := srv.Config.Handler.(*authRecorder)
	if as, groups := rec.impersonated(); as != "alice" || strings.Join(groups, ",") != "team-a,system:authenticated" {
		t.Errorf("Impersonate-User %q, Impersonate-Group %q; want alice and team-a,system:authenticated", as, groups)
	}
	if got := rec.last(); got != "Bearer other" {
		t.Errorf("Authorization = %q, want the --token", got)
	}
}

func TestReleaseStatusErrors(t *testing.T) {
	t.Parallel()
	srv := healthServer(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	kc := kubeconfigFor(t, srv.URL, "")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"missing release", []string{"release", "status", "nope", "--kubeconfig", kc}, exitEndpointError,
			"convoyctl: reading the health of release default/nope: release default/nope not found\n"},
		{"unreachable", []string{"release", "status", "shop", "--kubeconfig", kubeconfigFor(t, closed.URL, "")}, exitEndpointError, "connect"},
		{"unreachable direct", []string{"release", "status", "shop", "--kubeconfig", kc, "--api-url", closed.URL}, exitEndpointError, "connect"},
		{"no kubeconfig", []string{"release", "status", "shop", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, exitEndpointError, "loading the kubeconfig"},
		{"unknown context", []string{"release", "status", "shop", "--kubeconfig", kc, "--context", "nope"}, exitEndpointError, `context "nope"`},
		{"no name", []string{"release", "status", "--kubeconfig", kc}, exitUsage, "needs exactly one release NAME"},
		{"two names", []string{"release", "status", "a", "b"}, exitUsage, "needs exactly one release NAME"},
		{"empty name", []string{"release", "status", ""}, exitUsage, "got an empty one"},
		{"bad url", []string{"release", "status", "shop", "--api-url", "127.0.0.1:8090"}, exitUsage, `invalid --api-url "127.0.0.1:8090"`},
		{"CA without URL", []string{"release", "status", "shop", "--api-ca-file", "ca.crt"}, exitUsage, "--api-ca-file needs --api-url"},
		{"bad flag", []string{"release", "status", "shop", "--bogus"}, exitUsage, "unknown flag"},
		{"unknown subcommand", []string{"release", "stats"}, exitUsage, `unknown command "stats"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assertRun(t, tc.args, tc.code, "", tc.stderr)
		})
	}
}

func TestCell(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "-", "a\tb\nc": "a b c", "ok": "ok", "a\u009bb\u202ec": "a b c"} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
	if !strings.HasPrefix(timeCell(nil), "-") {
		t.Error("timeCell(nil) is not -")
	}
}

// TestPrintEntriesDiagnosis: under the table, one DIAGNOSIS line per entry that has
// one, inert on a terminal; none without.
func TestPrintEntriesDiagnosis(t *testing.T) {
	entries := []syncapi.HealthEntry{
		{Group: "apps", Kind: "Deployment", Namespace: "demo", Name: "web", State: "Progressing", Message: "1/3 available",
			Diagnosis: "Pod demo/web-x: not scheduled: Unschedulable: 0/2 nodes are available\x1b[2J"},
		{Kind: "ConfigMap", Namespace: "demo", Name: "cfg", State: "Healthy"},
	}
	var b strings.Builder
	if err := printEntries(&b, entries); err != nil {
		t.Fatal(err)
	}
	want := "\nDIAGNOSIS\nDeployment demo/web: Pod demo/web-x: not scheduled: Unschedulable: 0/2 nodes are available [2J\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("got\n%s\nwant it to end with\n%s", b.String(), want)
	}
	b.Reset()
	_ = printEntries(&b, entries[1:])
	if strings.Contains(b.String(), "DIAGNOSIS") {
		t.Errorf("got a DIAGNOSIS section without a diagnosis:\n%s", b.String())
	}
}
