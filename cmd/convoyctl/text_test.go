package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// hostile is a message that a rule author's messageExpression could compute: it
// clears the screen, sets the terminal's title, fakes a line of convoyctl's, and hides
// text behind C1 controls (U+009B is the one-character CSI, U+0085 a next line) and
// bidirectional overrides and isolates.
const hostile = "ok\x1b[2J\x1b]0;pwned\x07\nFAKE: release demo/web is Healthy\r\u009b2J\u0085\u202egnp.exe\u2066x\u2069\x7f"

// terminalActive lists the characters of hostile that act on a terminal, except the
// line feed, which is looked at line by line (assertInert).
var terminalActive = []string{"\x1b", "\x07", "\r", "\u009b", "\u0085", "\u202e", "\u2066", "\u2069", "\x7f"}

// assertInert checks that out shows hostile only as inert text: none of its active
// characters, and no line of output that starts with its fake line.
func assertInert(t *testing.T, what, out string) {
	t.Helper()
	for _, c := range terminalActive {
		if strings.Contains(out, c) {
			t.Errorf("%s holds %q:\n%q", what, c, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "FAKE") {
			t.Errorf("%s has the fake line %q:\n%s", what, l, out)
		}
	}
	if !strings.Contains(out, "pwned") {
		t.Errorf("%s does not show the message at all:\n%s", what, out)
	}
}

// hostileServer answers …/demo/releases/web/health with a Degraded entry whose
// message, rule set name and decidedByError, and a hook's message, are hostile.
func hostileServer(t *testing.T) *httptest.Server {
	t.Helper()
	h := map[string]any{
		"release": "demo/web" + hostile, "renderCurrent": true, "decidedByError": hostile,
		"summary": map[string]any{"total": 1, "healthy": 0, "progressing": 0, "degraded": 1, "unknown": 0},
		"entries": []any{map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "demo", "name": "web", "wave": 0,
			"state": "Degraded", "message": hostile, "renderRef": "r1", "assessedRenderRef": "r1", "rulesApplied": 1,
			"decidedBy": map[string]any{"kind": "GlobalHealthRuleSet", "name": "evil" + hostile, "rule": 0, "cause": "DeadlinePassed"}}},
		"hooks": []any{map[string]any{"name": "pre", "workloadKind": "Job", "namespace": "demo", "workloadName": "pre-1", "state": "Running", "message": hostile}},
	}
	body, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/demo/releases/web/health" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestUntrustedTextIsInert: what objects and rules say reaches the terminal as text,
// never as control sequences or lines of its own, in every printer of release wait and
// release status.
func TestUntrustedTextIsInert(t *testing.T) {
	t.Parallel()
	srv := hostileServer(t)
	t.Run("release wait", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runCLI("release", "wait", "web", "-n", "demo", "--api-url", srv.URL, "--timeout", "30s")
		if code != exitDegraded {
			t.Fatalf("exit %d, want %d; stderr: %s", code, exitDegraded, stderr)
		}
		assertInert(t, "stdout", stdout)
		assertInert(t, "stderr", stderr)
		if !strings.Contains(stdout, "is Degraded: 0/1 healthy; Deployment demo/web: ok [2J ]0;pwned  FAKE: release demo/web is Healthy") {
			t.Errorf("the progress line does not show the message as text:\n%s", stdout)
		}
	})
	t.Run("release status --explain", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runCLI("release", "status", "web", "-n", "demo", "--api-url", srv.URL, "--explain")
		if code != exitOK {
			t.Fatalf("exit %d; stderr: %s", code, stderr)
		}
		assertInert(t, "stdout", stdout)
	})
	t.Run("release status -o json keeps the message, escaped", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runCLI("release", "status", "web", "-n", "demo", "--api-url", srv.URL, "-o", "json")
		if code != exitOK {
			t.Fatalf("exit %d; stderr: %s", code, stderr)
		}
		assertInert(t, "stdout", stdout)
		var got struct {
			Entries []struct{ Message string }
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Entries) != 1 || got.Entries[0].Message != hostile {
			t.Errorf("the JSON does not read back as the message (%v): %+v", err, got)
		}
	})
}

// TestHealthEvalUntrustedText: health eval escapes what a messageExpression computes in
// its JSON lines (the value reads back the same), and names a hostile kind inertly.
func TestHealthEvalUntrustedText(t *testing.T) {
	t.Parallel()
	rules := writeFile(t, "rules.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: GlobalHealthRuleSet
metadata: {name: loud}
spec:
  rules:
  - apiVersion: v1
    resources: [configmaps]
    ruleExpression: "false"
    messageExpression: "'ok\\x1b[2J\\x1b]0;pwned\\x07\\nFAKE: release demo/web is Healthy\\r\\u009b2J\\u0085\\u202egnp.exe\\u2066x\\u2069\\x7f'"
`)
	cm := writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: demo}\n")
	code, stdout, stderr := runCLI("health", "eval", "--rules", rules, "--object", cm)
	if code != exitOK {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	assertInert(t, "stdout", stdout)
	var line evalLine
	if err := json.Unmarshal([]byte(stdout), &line); err != nil || line.Message != hostile {
		t.Errorf("the line does not read back as the message (%v): %q", err, line.Message)
	}

	evil := writeFile(t, "evil.yaml", "apiVersion: ex.io/v1\nkind: \"Evil\\u202e\\x1b[2J\"\nmetadata: {name: \"pwned\\nFAKE\\u009b\"}\n")
	code, _, stderr = runCLI("health", "eval", "--rules", rules, "--object", evil)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitUsage, stderr)
	}
	assertInert(t, "stderr", stderr)
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ok": "ok", "a\tb\nc\rd": "a b c d", "\x1b[2J": " [2J", "a\u009bb\u0085c": "a b c",
		"\u202eabc\u202c": " abc ", "\u2066x\u2069\u200f": " x  ", "line\u2028sep": "line sep", "bad\x9bbyte": "bad\ufffdbyte",
		"ünïcødé ✓": "ünïcødé ✓",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	if got := sanitizeLines("a\x1b\nb\u202e"); got != "a \nb " {
		t.Errorf("sanitizeLines = %q", got)
	}
	if got := string(escapeUnsafeJSON([]byte(`{"m":"a` + "\u009b\u202e\x7f" + `é"}`))); got != `{"m":"a\u009b\u202e\u007fé"}` {
		t.Errorf("escapeUnsafeJSON = %s", got)
	}
}
