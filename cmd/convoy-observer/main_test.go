package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runMainEnv makes the test binary run main instead of the tests (see runBinary).
const runMainEnv = "CONVOY_OBSERVER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runBinary runs convoy-observer (this test binary, re-executed into main) with args and
// exactly the environment env, and returns its stdout, its stderr and its exit status.
func runBinary(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{runMainEnv + "=1", "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestLogsGoToStderr: the logs go to stderr, stdout stays empty.
func TestLogsGoToStderr(t *testing.T) {
	stdout, stderr, code := runBinary(t, nil, "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
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
			_, stderr, code := runBinary(t, tc.env)
			if code != 1 || !strings.Contains(stderr, "loading the kubeconfig") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q: want 1 and the in-cluster config's error (%q)", code, stderr, tc.want)
			}
		})
	}
}
