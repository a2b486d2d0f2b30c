package library_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// docsFile is the library's documentation; the part between the two markers is
// generated from testdata/cases.yaml.
const (
	docsFile    = "../../docs/rule-library.md"
	tableBegin  = "<!-- BEGIN GENERATED TABLE: go test ./health/library -run TestDocsTable -update -->"
	tableEnd    = "<!-- END GENERATED TABLE -->"
	repoTestdir = "health/library/testdata/"
)

// TestDocsTable checks that the comparison table of docs/rule-library.md is the one that
// testdata/cases.yaml gives (with -update, it rewrites it). TestCases checks the cases
// themselves against the rules, so the table always shows what the library does.
func TestDocsTable(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("| Fixture | Argo CD | convoy-observer | Message | Why they differ |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, c := range readCases(t) {
		file := "[" + c.File + "](../" + repoTestdir + c.File + ")"
		if rest, ok := strings.CutPrefix(c.File, gitopsEnginePrefix); ok {
			file = "[gitops-engine " + rest + "](../testdata/gitops-engine-health/" + rest + ")"
		}
		state := c.State
		if state == "Progressing" {
			state = "Progressing → Degraded after the deadline"
		}
		fmt.Fprintf(&b, "| %s<br>(like %s) | %s | %s | %s | %s |\n", file, mdCell(c.ArgoFixture), c.Argo, state, mdCell(c.Message), mdCell(c.Why))
	}
	table := b.String()

	doc, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), tableBegin)
	_, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the markers %q and %q", docsFile, tableBegin, tableEnd)
	}
	want := before + tableBegin + "\n" + table + tableEnd + after
	if *update {
		if err := os.WriteFile(docsFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(doc) != want {
		t.Errorf("the table of %s is stale: run go test ./health/library -run TestDocsTable -update", docsFile)
	}
}

// mdCell escapes a table cell: pipes and newlines would break the row; - when empty.
func mdCell(s string) string {
	if s == "" {
		return "-"
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
