// Package api_test checks that the generated deepcopy code and CRDs match the types.
package api_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesFresh regenerates the deepcopy files and CRDs into a temporary
// directory and fails when a committed file differs: run `make generate` to fix it.
func TestGeneratedFilesFresh(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", append([]string{"tool", "controller-gen"}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("controller-gen %v: %v\n%s", args, err, out)
		}
	}
	run("crd:crdVersions=v1", "paths=./api/...", "output:crd:artifacts:config="+filepath.Join(tmp, "crd"))
	compareDir(t, filepath.Join(tmp, "crd"), filepath.Join(root, "config", "crd", "bases"))
	for _, pkg := range []string{"v1alpha1", "extensions/v1alpha1"} {
		out := filepath.Join(tmp, "object", pkg)
		run("object", "paths=./api/"+pkg, "output:object:dir="+out)
		compareDir(t, out, filepath.Join(root, "api", pkg), "zz_generated.deepcopy.go")
	}
}

// compareDir fails unless every file of fresh (or only the named ones) equals the file
// of the same name in committed, and, for whole directories, no file is extra.
func compareDir(t *testing.T, fresh, committed string, only ...string) {
	t.Helper()
	names := only
	if len(names) == 0 {
		entries, err := os.ReadDir(fresh)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		have, err := os.ReadDir(committed)
		if err != nil {
			t.Fatal(err)
		}
		if len(have) != len(names) {
			t.Errorf("%s holds %d files, controller-gen makes %d: run make generate", committed, len(have), len(names))
		}
	}
	for _, n := range names {
		want, err := os.ReadFile(filepath.Join(fresh, n))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(committed, n))
		if err != nil {
			t.Errorf("%s: %v (run make generate)", n, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make generate", filepath.Join(committed, n))
		}
	}
}
