package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommandName(t *testing.T) {
	t.Parallel()
	for argv0, want := range map[string]string{
		"convoyctl": "convoyctl", "/usr/local/bin/convoyctl": "convoyctl", "./bin/kubectl-convoy": "kubectl convoy",
		"kubectl-convoy.exe": "kubectl convoy", "kubectl-convoyctl": "convoyctl", "/tmp/go-build1/exe/main": "convoyctl",
	} {
		if got := commandName(argv0); got != want {
			t.Errorf("commandName(%q) = %q, want %q", argv0, got, want)
		}
	}
}

// TestKubectlPlugin: as kubectl convoy, help, errors and --version name the command as
// the user typed it, and kubectl finds the binary on $PATH and runs it.
func TestKubectlPlugin(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := runNamed(context.Background(), "kubectl convoy", []string{"release", "stats"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if want := "kubectl convoy: unknown command \"stats\" for \"kubectl convoy release\"\nRun 'kubectl convoy release --help' for usage.\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	stdout.Reset()
	if code := runNamed(context.Background(), "kubectl convoy", []string{"release", "status", "--help"}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "kubectl convoy release status NAME") || !strings.Contains(stdout.String(), "--as-group") {
		t.Errorf("exit %d, help:\n%s", code, stdout.String())
	}

	// The binary itself, built under the plugin's name and run by kubectl when there is
	// one on $PATH (else directly).
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, pluginBinary)
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--version")
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		cmd = exec.Command(kubectl, "convoy", "--version")
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	} else {
		t.Logf("no kubectl on $PATH: running %s directly", bin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kubectl convoy ") {
		t.Errorf("%s: %v, printed %q; want \"kubectl convoy VERSION …\"", cmd, err, out)
	}
}
