package testenv

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestControlPlaneBinaries: hack/controlplane.sh path prints one directory holding the
// five binaries, each of which runs; kube binaries report the pinned version.
func TestControlPlaneBinaries(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack", "controlplane.sh"), "path").Output()
	if err != nil {
		t.Fatalf("hack/controlplane.sh path: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if strings.Contains(dir, "\n") {
		t.Fatalf("stdout holds more than the directory: %q", out)
	}
	for _, c := range []struct{ bin, arg, want string }{
		{"kube-apiserver", "--version", "Kubernetes v1.37."},
		{"kube-controller-manager", "--version", "Kubernetes v1.37."},
		{"kube-scheduler", "--version", "Kubernetes v1.37."},
		{"etcd", "--version", "etcd Version: 3.6."},
		{"kwok", "--help", "kwok"},
	} {
		got, err := exec.Command(filepath.Join(dir, c.bin), c.arg).CombinedOutput()
		if err != nil {
			t.Errorf("%s %s: %v\n%s", c.bin, c.arg, err, got)
			continue
		}
		if !strings.Contains(string(got), c.want) {
			t.Errorf("%s %s printed %q, want it to contain %q", c.bin, c.arg, firstLine(got), c.want)
		}
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}
