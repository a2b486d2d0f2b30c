package health

import (
	"path/filepath"
	"strings"
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

func ruleSet(rules ...extv1alpha1.RuleSpec) []extv1alpha1.GlobalHealthRuleSet {
	return []extv1alpha1.GlobalHealthRuleSet{{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: rules}}}
}

func TestFieldsOfExpressions(t *testing.T) {
	base := "apiVersion,kind,metadata,spec.paused,spec.replicas,spec.selector,spec.suspend,status"
	for _, tc := range []struct {
		expr, message string
		want          string
	}{
		{expr: "object.spec.minReadySeconds > 0", want: base + ",spec.minReadySeconds"},
		{expr: "object.?spec.?strategy.?type.orValue('') == 'Recreate'", want: base + ",spec.strategy.type"},
		{expr: "has(object.spec.template) && object.spec['revisionHistoryLimit'] == 1", want: base + ",spec.revisionHistoryLimit,spec.template"},
		{expr: "object.spec.template.spec.containers.exists(c, c.image == 'x')", want: base + ",spec.template.spec.containers"},
		{expr: "true", message: "'x' + string(object.spec.progressDeadlineSeconds)", want: base + ",spec.progressDeadlineSeconds"},
		// object used whole, a computed key, an expression that does not parse: everything.
		{expr: "size(object) > 0", want: "*"},
		{expr: "dyn(object).?spec.?x.orValue(0) > dyn(object).spec.y", want: base + ",spec.x,spec.y"},
		{expr: "size(dyn(object)) > 0", want: "*"},
		// The operand of a computed key, and a comprehension's range, are kept whole.
		{expr: "object.spec[object.metadata.name] == 1", want: "apiVersion,kind,metadata,spec,status"},
		{expr: "object.spec.exists(k, k == 'a')", want: "apiVersion,kind,metadata,spec,status"},
		{expr: "object.spec.(", want: "*"},
		{expr: "[object][0].spec.x == 1", want: "*"},
		// The root-scoped .object is object.
		{expr: ".object.spec.x == 1 && has(.object.spec.y) && .dyn(.object).spec.z == 1", want: base + ",spec.x,spec.y,spec.z"},
		{expr: "size(.object) > 0", want: "*"},
	} {
		rf := FieldsOf(ruleSet(extv1alpha1.RuleSpec{APIVersion: "apps/v1", Resources: []string{"deployments"},
			RuleExpression: tc.expr, MessageExpression: tc.message}), nil)
		got := rf.For("apps/v1", "deployments").String()
		want := tc.want
		if want != "*" {
			want = fieldsOfPaths(strings.Split(want, ",")...).String()
		}
		if got != want {
			t.Errorf("%q: kept %s, want %s", tc.expr, got, want)
		}
	}
}

func TestFieldsOfMatching(t *testing.T) {
	rf := FieldsOf(ruleSet(
		extv1alpha1.RuleSpec{APIVersion: "apps/v1", Resources: []string{"deployments"}, RuleExpression: "object.spec.a == 1"},
		extv1alpha1.RuleSpec{APIVersion: "*", Resources: []string{"*"}, RuleExpression: "object.spec.b == 1"},
		extv1alpha1.RuleSpec{APIVersion: "batch/v1", Resources: []string{"jobs"}, RuleExpression: "object.spec.c == 1"},
	), nil)
	if got := rf.For("apps/v1", "deployments"); !got.Covers(fieldsOfPaths("spec.a", "spec.b")) || got.Covers(fieldsOfPaths("spec.c")) {
		t.Errorf("deployments keep %s: want spec.a and spec.b (the wildcard), not spec.c", got)
	}
	if got := rf.For("v1", "configmaps"); got.Covers(fieldsOfPaths("data")) || !got.Covers(fieldsOfPaths("spec.b")) {
		t.Errorf("configmaps keep %s: want spec.b (the wildcard), not data", got)
	}
	var none *RuleFields
	if none.For("v1", "configmaps") != nil || rf.Merge(nil) != nil {
		t.Error("a nil RuleFields must keep every field")
	}
	merged := rf.Merge(FieldsOf(ruleSet(extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "object.data.x == 'y'"}), nil))
	if !merged.For("v1", "configmaps").Covers(fieldsOfPaths("data.x", "spec.b")) {
		t.Errorf("merged configmaps keep %s: want data.x and spec.b", merged.For("v1", "configmaps"))
	}
}

func fieldsOfPaths(paths ...string) *Fields {
	f := &Fields{}
	for _, p := range paths {
		f.add(splitPath(p))
	}
	return f
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

func TestFieldsPrune(t *testing.T) {
	obj := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "y"}},
		"spec": map[string]any{
			"replicas": int64(3), "selector": map[string]any{"matchLabels": map[string]any{"app": "a"}},
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}},
			"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "25%"}},
		},
		"status": map[string]any{"replicas": int64(3)},
		"data":   map[string]any{"secret": "value"},
	}
	f := FieldsOf(ruleSet(extv1alpha1.RuleSpec{APIVersion: "apps/v1", Resources: []string{"deployments"},
		RuleExpression: "object.spec.strategy.type == 'RollingUpdate'"}), nil).For("apps/v1", "deployments")
	f.Prune(obj)
	spec := obj["spec"].(map[string]any)
	if _, ok := spec["template"]; ok {
		t.Error("spec.template kept: no rule reads it")
	}
	if _, ok := obj["data"]; ok {
		t.Error("data kept: no rule reads it")
	}
	if s := spec["strategy"].(map[string]any); s["type"] != "RollingUpdate" || s["rollingUpdate"] != nil {
		t.Errorf("spec.strategy pruned to %v, want the type only", s)
	}
	if spec["replicas"] != int64(3) || spec["selector"] == nil || obj["metadata"].(map[string]any)["labels"] == nil || obj["status"] == nil {
		t.Errorf("a field the loop reads was dropped: %v", obj)
	}
}

// TestFieldsOfShippedRules: every shipped rule set analyses (no rule keeps every field
// of its types for want of understanding it), so the cache saves memory with them.
func TestFieldsOfShippedRules(t *testing.T) {
	sets := shippedRuleSets(t)
	if len(sets) < 3 {
		t.Fatalf("read %d rule sets", len(sets))
	}
	rf := FieldsOf(sets, nil)
	got := rf.For("apps/v1", "deployments")
	if got == nil || got.Covers(fieldsOfPaths("spec.template")) {
		t.Errorf("with every shipped set, Deployments keep %s: want less than the whole object, without spec.template", got)
	}
}

// shippedRuleSets reads every shipped GlobalHealthRuleSet: the library, convoy-defaults
// and the generic set.
func shippedRuleSets(t *testing.T) []extv1alpha1.GlobalHealthRuleSet {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("library", "*.yaml"))
	var sets []extv1alpha1.GlobalHealthRuleSet
	for _, file := range append(files, "convoy-defaults.yaml", "generic.yaml") {
		g, _ := manifesttest.RuleSets(t, file)
		sets = append(sets, g...)
	}
	return sets
}
