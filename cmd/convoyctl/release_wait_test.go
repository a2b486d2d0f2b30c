package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
)

func TestJudge(t *testing.T) {
	t.Parallel()
	e := func(name string, state v1alpha1.HealthState, render, assessed, msg string) syncapi.HealthEntry {
		return syncapi.HealthEntry{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: name,
			State: state, RenderRef: render, AssessedRenderRef: assessed, Message: msg}
	}
	cases := []struct {
		name    string
		h       syncapi.HealthResult
		reason  string
		detail  string
		offends []string
	}{
		{"no entries", syncapi.HealthResult{RenderCurrent: true}, reasonHealthy, "0/0 healthy", nil},
		{"all healthy", syncapi.HealthResult{RenderCurrent: true, Entries: []syncapi.HealthEntry{
			e("a", v1alpha1.StateHealthy, "r2", "r2", "")}}, reasonHealthy, "1/1 healthy", nil},
		{"another render", syncapi.HealthResult{RenderCurrent: false, Entries: []syncapi.HealthEntry{
			e("a", v1alpha1.StateHealthy, "r1", "r1", "")}}, reasonPending, "1/1 healthy; entries of another render than status.lastAttempted", nil},
		{"Degraded of the previous render is Pending", syncapi.HealthResult{RenderCurrent: true, Entries: []syncapi.HealthEntry{
			e("a", v1alpha1.StateDegraded, "r2", "r1", "x")}}, reasonPending, "0/1 healthy; 1 entries not assessed at their render yet", []string{"a"}},
		{"not assessed yet", syncapi.HealthResult{RenderCurrent: true, Entries: []syncapi.HealthEntry{
			e("a", "", "r2", "", "")}}, reasonPending, "0/1 healthy; 1 entries not assessed at their render yet", []string{"a"}},
		{"Degraded wins over Unknown and Progressing", syncapi.HealthResult{RenderCurrent: true, Entries: []syncapi.HealthEntry{
			e("a", v1alpha1.StateProgressing, "r2", "r2", "p"), e("b", v1alpha1.StateUnknown, "r2", "r2", "u"),
			e("c", v1alpha1.StateDegraded, "r2", "r2", "1/3 available"), e("d", v1alpha1.StateHealthy, "r2", "r2", "")}},
			reasonDegraded, "1/4 healthy; Deployment demo/c: 1/3 available", []string{"c"}},
		{"Unknown over Progressing", syncapi.HealthResult{RenderCurrent: true, Entries: []syncapi.HealthEntry{
			e("a", v1alpha1.StateProgressing, "r2", "r2", "p"), e("b", v1alpha1.StateUnknown, "r2", "r2", "object not found")}},
			reasonUnknown, "0/2 healthy; Deployment demo/b: object not found", []string{"a", "b"}},
		{"Progressing", syncapi.HealthResult{RenderCurrent: true, Entries: []syncapi.HealthEntry{
			e("a", v1alpha1.StateProgressing, "r2", "r2", "1/3 available"), e("b", v1alpha1.StateHealthy, "r2", "r2", "")}},
			reasonProgressing, "1/2 healthy; Deployment demo/a: 1/3 available", []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := judge(&tc.h)
			var names []string
			for _, o := range v.notHealthy {
				names = append(names, o.Name)
			}
			if v.reason != tc.reason || v.detail != tc.detail || strings.Join(names, ",") != strings.Join(tc.offends, ",") {
				t.Errorf("judge = %s %q %v, want %s %q %v", v.reason, v.detail, names, tc.reason, tc.detail, tc.offends)
			}
		})
	}
}

func TestParseWaitFor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]waitTarget{
		"healthy":               {reason: reasonHealthy, failOnDegraded: true},
		"Degraded":              {reason: reasonDegraded},
		"condition=Progressing": {reason: reasonProgressing},
		"condition=healthy":     {reason: reasonHealthy, failOnDegraded: true},
		"condition=Pending":     {reason: reasonPending},
	} {
		if got, err := parseWaitFor(in); err != nil || got != want {
			t.Errorf("parseWaitFor(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ready", "condition=", "condition=NotConfigured"} {
		if _, err := parseWaitFor(in); err == nil {
			t.Errorf("parseWaitFor(%q) accepted", in)
		}
	}
}

// TestReleaseWait runs release wait against convoy-api's handler over a real API server,
// with the inventory written as the controller-manager and the observer write it.
func TestReleaseWait(t *testing.T) {
	env := controlPlane(t)
	url := apiServer(t, env)
	wait := func(name string, extra ...string) []string {
		return append([]string{"release", "wait", name, "-n", "default", "--api-url", url, "--interval", "100ms"}, extra...)
	}

	t.Run("Progressing then Healthy: exit 0", func(t *testing.T) {
		r := newTestRelease(t, env, "wait-ok", "r1", "web", "api")
		r.assess("r1", map[string][2]string{"web": {"Progressing", "1/3 available, 1 updated"}, "api": {"Healthy", ""}})
		stdout, stderr, exit := started(context.Background(), wait("wait-ok", "--timeout", "30s")...)
		eventually(t, "the Progressing line", func() bool { return strings.Contains(stdout.String(), "is Progressing: 1/2 healthy") })
		r.assess("r1", map[string][2]string{"web": {"Healthy", ""}, "api": {"Healthy", ""}})
		if code := exit(); code != exitOK {
			t.Fatalf("exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		out := stdout.String()
		for _, want := range []string{"release default/wait-ok is Progressing: 1/2 healthy; Deployment default/web: 1/3 available, 1 updated",
			"release default/wait-ok is Healthy: 2/2 healthy"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("Degraded: exit 3 at once, naming the entries", func(t *testing.T) {
		r := newTestRelease(t, env, "wait-degraded", "r1", "web", "api")
		r.assess("r1", map[string][2]string{"web": {"Degraded", "3/3 available, 1 updated"}, "api": {"Progressing", "waiting"}})
		code, stdout, stderr := runCLI(wait("wait-degraded", "--timeout", "30s")...)
		if code != exitDegraded {
			t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, exitDegraded, stdout, stderr)
		}
		if !strings.Contains(stdout, "Deployment.apps  default    web   Degraded (no rule)  r1      3/3 available, 1 updated") || strings.Contains(stdout, "api ") {
			t.Errorf("stdout does not list exactly the Degraded entry:\n%s", stdout)
		}
		// No rule decides it (none is selected) and nothing is missing: no excuse either.
		if strings.Contains(stdout, "Not explained") || strings.Contains(stdout, "rule 0 of") {
			t.Errorf("stdout explains an entry that no rule decides:\n%s", stdout)
		}
		if !strings.Contains(stderr, "release default/wait-degraded is Degraded: 0/2 healthy; Deployment default/web: 3/3 available, 1 updated") {
			t.Errorf("stderr: %s", stderr)
		}
		// Waiting for Degraded is a success.
		if code, _, stderr := runCLI(wait("wait-degraded", "--for", "degraded", "--timeout", "30s")...); code != exitOK {
			t.Errorf("--for degraded: exit %d; stderr: %s", code, stderr)
		}
	})

	t.Run("timeout: exit 4, naming what is still Progressing", func(t *testing.T) {
		r := newTestRelease(t, env, "wait-slow", "r1", "web", "api")
		// As an observer that does not record decidedBy and rulesApplied wrote it.
		r.assessUnrecorded("r1", map[string][2]string{"web": {"Progressing", "1/3 available"}, "api": {"Healthy", ""}})
		code, stdout, stderr := runCLI(wait("wait-slow", "--timeout", "500ms")...)
		if code != exitTimeout {
			t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, exitTimeout, stdout, stderr)
		}
		if !strings.Contains(stdout, "Not Healthy yet:") || !strings.Contains(stdout, "web   Progressing  r1      1/3 available") || strings.Contains(stdout, "api  ") {
			t.Errorf("stdout does not list exactly the Progressing entry:\n%s", stdout)
		}
		// /health has no recorded decidedBy for it, and says why.
		if !strings.Contains(stdout, "Not explained: the observer has not recorded decidedBy and rulesApplied for 2 of the 2 entries yet") {
			t.Errorf("stdout does not say why the Progressing entry is not explained:\n%s", stdout)
		}
		if !strings.Contains(stderr, "timed out after 500ms waiting for release default/wait-slow to be Healthy; it is Progressing") {
			t.Errorf("stderr: %s", stderr)
		}
	})

	t.Run("a Healthy state of the previous render does not count", func(t *testing.T) {
		r := newTestRelease(t, env, "wait-stale", "r2", "web")
		r.assess("r1", map[string][2]string{"web": {"Healthy", ""}})
		code, stdout, stderr := runCLI(wait("wait-stale", "--timeout", "500ms")...)
		if code != exitTimeout || !strings.Contains(stderr, "it is Pending") || !strings.Contains(stdout, "r2 (assessed r1)") {
			t.Errorf("exit %d, want %d Pending; stdout:\n%s\nstderr:\n%s", code, exitTimeout, stdout, stderr)
		}
		// --for condition=Pending sees it.
		if code, _, stderr := runCLI(wait("wait-stale", "--for", "condition=Pending", "--timeout", "30s")...); code != exitOK {
			t.Errorf("--for condition=Pending: exit %d; stderr: %s", code, stderr)
		}
	})

	t.Run("missing Release: exit 1 at once", func(t *testing.T) {
		code, _, stderr := runCLI(wait("nope", "--timeout", "1m")...)
		if code != exitEndpointError || !strings.Contains(stderr, "release default/nope not found") {
			t.Errorf("exit %d, want %d; stderr: %s", code, exitEndpointError, stderr)
		}
	})

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{wait("x", "--for", "ready"), wait("x", "--timeout", "0s"), {"release", "wait"}} {
			if code, _, stderr := runCLI(args...); code != exitUsage {
				t.Errorf("%v: exit %d, want %d; stderr: %s", args, code, exitUsage, stderr)
			}
		}
	})
}

// TestReleaseStatusWatch checks that --watch prints the status again when it changes,
// and only then, and ends cleanly when interrupted.
func TestReleaseStatusWatch(t *testing.T) {
	env := controlPlane(t)
	url := apiServer(t, env)
	r := newTestRelease(t, env, "watched", "r1", "web")
	r.assess("r1", map[string][2]string{"web": {"Progressing", "1/3 available"}})
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr, exit := started(ctx, "release", "status", "watched", "-n", "default", "--api-url", url, "--watch", "--interval", "100ms")
	eventually(t, "the first status", func() bool { return strings.Contains(stdout.String(), "progressing=1") })
	r.assess("r1", map[string][2]string{"web": {"Healthy", ""}})
	eventually(t, "the second status", func() bool { return strings.Contains(stdout.String(), "healthy=1 progressing=0") })
	cancel()
	if code := exit(); code != exitOK {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	if n := strings.Count(stdout.String(), "Release default/watched"); n != 2 {
		t.Errorf("printed the status %d times, want 2 (once per change):\n%s", n, stdout)
	}
}

// TestReleaseWaitHungEndpoint: a health endpoint that accepts the connection and never
// answers cannot hold release wait past its --timeout (each read gets the time left, plus
// a short grace), and the message says that no read answered. The bound is generous: the
// client's own request timeout, which the wait used to wait out, is 30s.
func TestReleaseWaitHungEndpoint(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	start := time.Now()
	code, stdout, stderr := runCLI("release", "wait", "web", "-n", "demo", "--api-url", "http://"+l.Addr().String(), "--timeout", "1s", "--interval", "200ms")
	elapsed := time.Since(start)
	if code != exitEndpointError || !strings.Contains(stderr, "timed out after 1s waiting for release demo/web to be Healthy; no read of its health answered") {
		t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, exitEndpointError, stdout, stderr)
	}
	if elapsed > 15*time.Second {
		t.Errorf("release wait --timeout 1s returned after %s", elapsed)
	}
}

// TestReleaseWaitHangsAfterAnAnswer: when the endpoint answered Progressing and then
// stops answering, the timeout is a timeout (exit 4) that says the last read got no
// answer and what the Release was at the read before.
func TestReleaseWaitHangsAfterAnAnswer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	answered := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := !answered
		answered = true
		mu.Unlock()
		if !first {
			<-r.Context().Done() // never answers again
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"release":"demo/web","renderCurrent":true,"summary":{"total":1,"healthy":0,"progressing":1,"degraded":0,"unknown":0},
 "entries":[{"group":"apps","version":"v1","kind":"Deployment","namespace":"demo","name":"web","wave":0,"state":"Progressing","message":"1/3 available","renderRef":"r1","assessedRenderRef":"r1","rulesApplied":1}],"hooks":[]}`))
	}))
	t.Cleanup(srv.Close)
	start := time.Now()
	code, stdout, stderr := runCLI("release", "wait", "web", "-n", "demo", "--api-url", srv.URL, "--timeout", "1s", "--interval", "200ms")
	elapsed := time.Since(start)
	if code != exitTimeout || !strings.Contains(stderr, "timed out after 1s waiting for release demo/web to be Healthy; the last read got no answer in time; "+
		"at the one before it was Progressing: 0/1 healthy; Deployment demo/web: 1/3 available") || !strings.Contains(stdout, "Not Healthy yet:") {
		t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, exitTimeout, stdout, stderr)
	}
	if elapsed > 15*time.Second {
		t.Errorf("release wait --timeout 1s returned after %s", elapsed)
	}
}
