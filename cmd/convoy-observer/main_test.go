package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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

// TestKlogLinesAreJSON: what client-go logs through klog (a reflector's warning) comes
// out as a JSON line of the observer's logger, not as klog's plain text.
func TestKlogLinesAreJSON(t *testing.T) {
	var buf bytes.Buffer
	setupLogging(&zap.Options{StacktraceLevel: zapcore.DPanicLevel}, &buf)
	klog.InfoS("Warning: watch ended with error", "reflector", "r")
	klog.Flush()
	line := strings.TrimSpace(buf.String())
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil || m["msg"] != "Warning: watch ended with error" || m["reflector"] != "r" {
		t.Fatalf("klog's line %q is not the logger's JSON: %v", line, err)
	}
}
