package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHealthTest: health test runs the cases of a test file or of a directory's
// *.test.yaml files, prints a PASS or FAIL line per case (a FAIL says what it got and
// what was wanted) and a summary, writes a JUnit report, and exits 0 when every case
// passed, 1 when one failed, 2 on an invalid test file.
func TestHealthTest(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI("health", "test", "../../testdata/healthtest/workloads.test.yaml")
	passes := 0
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "PASS ") {
			passes++
		}
	}
	if code != exitOK || passes != 5 ||
		!strings.Contains(stdout, "5 cases in 1 files: 5 passed, 0 failed") {
		t.Fatalf("the library's cases: exit %d\n%s%s", code, stdout, stderr)
	}

	junit := filepath.Join(t.TempDir(), "report.xml")
	code, stdout, stderr = runCLI("health", "test", "../../testdata/healthtest-failing", "--junit", junit)
	want := `FAIL ../../testdata/healthtest-failing/wrong.test.yaml: wrong: state Progressing, want Healthy; message "1/1 available, 1 updated", want "all good"`
	if code != exitCompileError || !strings.Contains(stdout, want) || !strings.Contains(stdout, "1 passed, 1 failed") ||
		!strings.Contains(stderr, "1 of 2 cases failed") {
		t.Fatalf("a wrong case: exit %d\n%s%s\nwant the line %s", code, stdout, stderr, want)
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var report junitSuites
	if err := xml.Unmarshal(data, &report); err != nil || len(report.Suites) != 1 || report.Suites[0].Tests != 2 || report.Suites[0].Failures != 1 ||
		report.Suites[0].Cases[1].Failure == nil {
		t.Fatalf("JUnit report %s (%v); want one suite of 2 cases, the second failed", data, err)
	}

	bad := filepath.Join(t.TempDir(), "bad.test.yaml")
	if err := os.WriteFile(bad, []byte("rules: [x.yaml]\ncases: [{name: a, object: o.yaml, state: Healthy, extra: 1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI("health", "test", bad); code != exitUsage || !strings.Contains(stderr, "extra") {
		t.Errorf("a test file with an unknown field: exit %d, %q; want 2 naming it", code, stderr)
	}
}

// TestLibraryCasesThroughCommand runs every case of the rule library
// (health/library/testdata/library.test.yaml, generated from its cases.yaml) through
// convoyctl health test: the library is checked by the path a platform team's own tests
// take too.
func TestLibraryCasesThroughCommand(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI("health", "test", "../../health/library/testdata/library.test.yaml")
	last := stdout[strings.LastIndex(strings.TrimSuffix(stdout, "\n"), "\n")+1:]
	if code != 0 || !strings.Contains(last, " 0 failed") || strings.Contains(stdout, "FAIL") {
		t.Errorf("exit %d, stderr %q, summary %q", code, stderr, last)
	}
	if n := strings.Count(stdout, "\nPASS ") + 1; n < 700 {
		t.Errorf("only %d cases passed", n)
	}
}
