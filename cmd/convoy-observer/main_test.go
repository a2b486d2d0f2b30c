package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kumodo/convoy-observer/internal/testenv/selfexec"
)

func TestMain(m *testing.M) {
	selfexec.MainIfChild(main) // selfexec.Run's child: the binary itself
	os.Exit(m.Run())
}

// TestLogsGoToStderr: the logs go to stderr, stdout stays empty.
func TestLogsGoToStderr(t *testing.T) {
	stdout, stderr, code := selfexec.Run(t, nil, "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
	if code != 1 || !strings.Contains(stderr, "loading the kubeconfig") {
		t.Fatalf("exit %d, stderr %q: want 1 and the error logged to stderr", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing (logs go to stderr)", stdout)
	}
}

// TestInClusterFallback: without --kubeconfig the observer uses the in-cluster config,
// even when $KUBECONFIG names a kubeconfig. The in-cluster token path is fixed
// (/var/run/secrets/kubernetes.io/serviceaccount), so the test shows that the in-cluster
// config was the one loaded by its error: not in a cluster without
// KUBERNETES_SERVICE_HOST, the missing token file with it.
func TestInClusterFallback(t *testing.T) {
	const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	if _, err := os.Stat(tokenDir); err == nil {
		t.Skip("running in a pod: the in-cluster config would load")
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	data := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://127.0.0.1:1}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"outside a cluster": {[]string{"KUBECONFIG=" + kubeconfig}, "not running in a cluster"},
		"in a cluster":      {[]string{"KUBECONFIG=" + kubeconfig, "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=1"}, tokenDir},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := selfexec.Run(t, tc.env)
			if code != 1 || !strings.Contains(stderr, "loading the kubeconfig") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q: want 1 and the in-cluster config's error (%q)", code, stderr, tc.want)
			}
		})
	}
}

// TestLogLinesAreJSON: by default every line on stderr is a JSON object of
// component-base's logger (klog's, which controller-runtime and client-go both log
// through), and --logging-format=text turns them into klog's text.
func TestLogLinesAreJSON(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, stderr, code := selfexec.Run(t, nil, "--kubeconfig", missing)
	if code != 1 || stderr == "" {
		t.Fatalf("exit %d, stderr %q: want 1 and a logged error", code, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["msg"] == nil {
			t.Fatalf("stderr line %q is not a JSON log line: %v", line, err)
		}
	}
	_, stderr, _ = selfexec.Run(t, nil, "--kubeconfig", missing, "--logging-format", "text")
	if strings.HasPrefix(strings.TrimSpace(stderr), "{") || !strings.Contains(stderr, `"loading the kubeconfig"`) {
		t.Fatalf("--logging-format=text: stderr %q, want klog's text line", stderr)
	}
}

// TestUsageErrors: contradicting or out-of-range flags exit 2 before anything is
// loaded, naming every problem; the deprecated --leader-election-namespace still sets
// the Lease's namespace.
func TestUsageErrors(t *testing.T) {
	_, stderr, code := selfexec.Run(t, nil, "--disable-sync", "--sync-url", "https://x", "--workers", "0", "--leader-elect-resource-lock", "configmaps")
	for _, want := range []string{"contradict", "--workers 0", "only leases"} {
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr %q: want 2 and %q", code, stderr, want)
		}
	}
	_, stderr, code = selfexec.Run(t, nil, "--leader-elect", "--leader-election-namespace", "ns", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
	if code != 1 || strings.Contains(stderr, "needs --leader-elect-resource-namespace") || !strings.Contains(stderr, "deprecated") {
		t.Errorf("exit %d, stderr %q: want the Lease namespace taken from the deprecated flag (exit 1 at the kubeconfig)", code, stderr)
	}
	stdout, _, code := selfexec.Run(t, nil, "--no-such-flag")
	if code != 2 || stdout != "" {
		t.Errorf("an unknown flag: exit %d, stdout %q; want 2 and nothing on stdout", code, stdout)
	}
}
