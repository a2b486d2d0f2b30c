package lint_test

import (
	"os"
	"strings"
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/library"
	"github.com/kumodo/convoy-observer/health/lint"
	"github.com/kumodo/convoy-observer/health/manifest"
)

func read(t *testing.T, path string) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, l, err := manifest.DecodeRuleSets(f)
	if err != nil {
		t.Fatal(err)
	}
	return g, l
}

// TestLintFindsEachMistake checks that every rule of testdata/bad.yaml gives exactly the
// finding its comment announces.
func TestLintFindsEachMistake(t *testing.T) {
	t.Parallel()
	g, l := read(t, "testdata/bad.yaml")
	got := lint.Lint(g, l, &lint.Builtin{})
	want := []struct {
		rule     int
		field    string
		fragment string
	}{
		{0, "ruleExpression", "undefined field 'readyReplica'"},
		{1, "ruleExpression", "found no matching overload for '_==_' applied to '(int, string)'"},
		{2, "ruleExpression", "has(object.spec.strategy.rollingUpdate.maxSurge): object.spec.strategy.rollingUpdate may be absent"},
		{3, "resources", "apps/v1 deployment matches nothing known"},
		{4, "resources", "autoscaling/v2beta2 horizontalpodautoscalers matches nothing known"},
		{5, "ruleExpression", "does not compile: ERROR"},
		{6, "messageExpression", "undefined field 'phaze'"},
	}
	if len(got) != len(want) {
		t.Errorf("%d findings, want %d:\n%s", len(got), len(want), join(got))
	}
	for i, w := range want {
		if i >= len(got) {
			break
		}
		f := got[i]
		if f.Severity != lint.Error || f.Rule != w.rule || f.Field != w.field || !strings.Contains(f.Message, w.fragment) ||
			f.RuleSet != "GlobalHealthRuleSet/bad" {
			t.Errorf("finding %d = %s; want error of rule %d %s containing %q", i, f, w.rule, w.field, w.fragment)
		}
	}
}

func TestLintGoodRules(t *testing.T) {
	t.Parallel()
	g, l := read(t, "testdata/good.yaml")
	got := lint.Lint(g, l, &lint.Builtin{})
	if lint.HasErrors(got) || len(got) != 1 || got[0].Severity != lint.Note || got[0].RuleSet != "HealthRuleSet/team-a/good" ||
		!strings.Contains(got[0].Message, "example.com/v1 widgets not type-checked") {
		t.Errorf("findings:\n%s\nwant one note on the CRD", join(got))
	}
}

// TestLibraryAndDefaultsLintClean: the shipped rule sets have no error finding; rules
// of CRDs are notes offline.
func TestLibraryAndDefaultsLintClean(t *testing.T) {
	t.Parallel()
	sets, err := library.RuleSets()
	if err != nil {
		t.Fatal(err)
	}
	dg, _ := read(t, "../convoy-defaults.yaml")
	got := lint.Lint(append(dg, sets...), nil, &lint.Builtin{})
	for _, f := range got {
		if f.Severity == lint.Error {
			t.Errorf("%s", f)
		}
	}
}

func join(fs []lint.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}
