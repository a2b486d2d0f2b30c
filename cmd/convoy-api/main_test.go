package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kumodo/convoy-observer/internal/testenv/selfexec"
)

// TestLogsGoToStderr: the logs go to stderr, stdout stays empty.
func TestLogsGoToStderr(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := selfexec.Run(t, nil, "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--secure-port", strconv.Itoa(freePort(t)))
	if code != exitError || !strings.Contains(stderr, "convoy-api failed") || !strings.Contains(stderr, "loading --kubeconfig") {
		t.Fatalf("exit %d, stderr %q: want %d and the error logged to stderr", code, stderr, exitError)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing (logs go to stderr)", stdout)
	}
}

// TestInClusterFallback: without --kubeconfig convoy-api uses the in-cluster config,
// even when $KUBECONFIG names a kubeconfig. The in-cluster token path is fixed
// (/var/run/secrets/kubernetes.io/serviceaccount), so the test shows that the in-cluster
// config was the one loaded by its error: not in a cluster without
// KUBERNETES_SERVICE_HOST, the missing token file with it.
func TestInClusterFallback(t *testing.T) {
	t.Parallel()
	const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	if _, err := os.Stat(tokenDir); err == nil {
		t.Skip("running in a pod: the in-cluster config would load")
	}
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"outside a cluster": {[]string{"KUBECONFIG=" + kubeconfig}, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined"},
		"in a cluster":      {[]string{"KUBECONFIG=" + kubeconfig, "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=1"}, tokenDir},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := selfexec.Run(t, tc.env, "--secure-port", strconv.Itoa(freePort(t)))
			if code != exitError || !strings.Contains(stderr, "no --kubeconfig given and not running in a cluster") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q: want %d and the in-cluster config's error (%q)", code, stderr, exitError, tc.want)
			}
		})
	}
}
