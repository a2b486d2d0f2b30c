package library_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kumodo/convoy-observer/health/library"
)

// healthTestFile is every case of testdata/cases.yaml as a test file of convoyctl health
// test (docs/rules.md, "Testing rules"), which cmd/convoyctl's TestLibraryCasesThroughCommand
// runs through the command, so that every library case is checked by the path a
// platform team's own tests take too.
const healthTestFile = "testdata/library.test.yaml"

// TestHealthTestFile checks that testdata/library.test.yaml is the one that
// testdata/cases.yaml and the kinds' resources give (with -update, it rewrites it).
func TestHealthTestFile(t *testing.T) {
	t.Parallel()
	type testCase struct {
		Name    string `json:"name"`
		Object  string `json:"object"`
		State   string `json:"state"`
		Message string `json:"message"`
	}
	var rules []string
	for _, f := range library.FileNames() {
		rules = append(rules, "../"+f)
	}
	var cases []testCase
	for _, c := range readCases(t) {
		rel, err := filepath.Rel("testdata", casePath(t, c))
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, testCase{Name: c.File, Object: filepath.ToSlash(rel), State: c.State, Message: c.Message})
	}
	body, err := yaml.Marshal(struct {
		Rules     []string          `json:"rules"`
		Resources map[string]string `json:"resources"`
		Cases     []testCase        `json:"cases"`
	}{rules, resources, cases})
	if err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, 0, len(resources))
	for k := range resources {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	want := fmt.Sprintf("# Generated from cases.yaml by: go test ./health/library -run TestHealthTestFile -update\n"+
		"# Every case of the rule library (no deadline: a failing rule is Progressing), run by\n"+
		"# convoyctl health test in cmd/convoyctl's tests; %d cases, %d kinds.\n", len(cases), len(kinds)) + string(body)
	if *update {
		if err := os.WriteFile(healthTestFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(healthTestFile)
	if err != nil || string(got) != want {
		t.Errorf("%s is stale (%v): run go test ./health/library -run TestHealthTestFile -update", healthTestFile, err)
	}
}
