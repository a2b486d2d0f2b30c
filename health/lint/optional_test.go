package lint_test

import (
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/lint"
)

// TestOptionalSelection: an optional selection (a.?f, a[?'f'], and a selection chained
// after one), or has() ('f' in a), of a field that a resource's schema does not declare works on a
// live object (it yields none, has() is false), so lint accepts it; it warns when no
// resource the rule is checked against declares the field (a typo, or a rule that never
// reads anything). A plain selection of an undeclared field fails on every object and
// stays an error. An index with a string (a['f']) is the selection it is on a live
// object, also of a declared field.
func TestOptionalSelection(t *testing.T) {
	t.Parallel()
	src := lint.Sources{&lint.Builtin{}, crds(t, "testdata/widgets-crd.yaml", "testdata/things-crd.yaml")}
	for _, tc := range []struct {
		name       string
		apiVersion string
		resources  []string
		expr       string
		want       []string // findings other than the wildcard note, each a prefix
	}{
		{name: "optional select at top level", apiVersion: "v1", resources: []string{"configmaps"},
			expr: "object.?status.?conditions.orValue([]).size() == 0",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): object.?status (column 7): ConfigMap declares no field 'status': the selection always yields none"}},
		{name: "optional select, hasValue", apiVersion: "v1", resources: []string{"secrets"},
			expr: "!object.?status.hasValue()",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 secrets (Secret): object.?status (column 8): Secret declares no field 'status'"}},
		{name: "optional select on a CRD without status", apiVersion: "example.com/v1", resources: []string{"things"},
			expr: "object.?status.?conditions.orValue([]).all(c, c.status == 'True')",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: example.com/v1 things (Thing): object.?status (column 7): Thing declares no field 'status'"}},
		{name: "nested optional select", apiVersion: "apps/v1", resources: []string{"deployments"},
			expr: "object.status.?foo.orValue(0) == 0",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: apps/v1 deployments (Deployment): object.status.?foo (column 14): Deployment.status declares no field 'foo': the selection always yields none"}},
		{name: "select chained after an optional one", apiVersion: "v1", resources: []string{"configmaps"},
			expr: "object.?metadata.bogus.orValue('') == ''",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): object.?metadata.bogus (column 17): ConfigMap.metadata declares no field 'bogus': the selection always yields none"}},
		{name: "has at top level", apiVersion: "v1", resources: []string{"configmaps"},
			expr: "!has(object.status)",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): has(object.status) (column 5): ConfigMap declares no field 'status': has() is always false"}},
		{name: "has nested, parent guarded", apiVersion: "example.com/v1", resources: []string{"widgets"},
			expr: "has(object.status) && !has(object.status.foo)",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: example.com/v1 widgets (Widget): has(object.status.foo) (column 27): Widget.status declares no field 'foo': has() is always false"}},
		{name: "has nested, parent not guarded", apiVersion: "example.com/v1", resources: []string{"widgets"},
			expr: "!has(object.status.foo)",
			want: []string{
				"error: GlobalHealthRuleSet/t rule 0 ruleExpression: example.com/v1 widgets (Widget): has(object.status.foo): object.status may be absent",
				"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: example.com/v1 widgets (Widget): has(object.status.foo) (column 5): Widget.status declares no field 'foo'"}},
		{name: "optional index of a map", apiVersion: "v1", resources: []string{"configmaps"},
			expr: `object.?metadata.?labels[?"x"].orValue("") == ""`},
		{name: "optional index after an undeclared field", apiVersion: "v1", resources: []string{"configmaps"},
			expr: `object.?status[?"x"].orValue(1) == 1`,
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): object.?status (column 7): ConfigMap declares no field 'status'"}},
		{name: "optional index of an undeclared field", apiVersion: "v1", resources: []string{"configmaps"},
			expr: `object[?'status'].orValue({}).size() == 0`,
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): object[?\"status\"] (column 7): ConfigMap declares no field 'status'"}},
		{name: "index of a declared field", apiVersion: "apps/v1", resources: []string{"deployments"},
			expr: `object['spec']['replicas'] == 1 && object.?status[?'replicas'].orValue(0) == 1`},
		{name: "in of an undeclared field", apiVersion: "v1", resources: []string{"configmaps"},
			expr: `!('status' in object)`,
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): \"status\" in object (column 12): ConfigMap declares no field 'status': has() is always false"}},
		{name: "index of an undeclared field", apiVersion: "v1", resources: []string{"configmaps"},
			expr: `object['status'] == {}`,
			want: []string{"error: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): undefined field 'status' (column 7)"}},
		{name: "index of a list with a string", apiVersion: "apps/v1", resources: []string{"deployments"},
			expr: `object.spec.template.spec.containers['x'] == 1`,
			want: []string{"error: GlobalHealthRuleSet/t rule 0 ruleExpression: apps/v1 deployments (Deployment): found no matching overload for '_[_]'"}},
		{name: "declared fields", apiVersion: "example.com/v1", resources: []string{"widgets"},
			expr: "object.?status.?ready.orValue(false) && has(object.spec) && has(object.spec.color)"},
		{name: "plain select at top level", apiVersion: "v1", resources: []string{"configmaps"},
			expr: "object.status.conditions.size() == 0",
			want: []string{"error: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): undefined field 'status' (column 7)"}},
		{name: "plain select nested", apiVersion: "apps/v1", resources: []string{"deployments"},
			expr: "object.status.foo == 1",
			want: []string{"error: GlobalHealthRuleSet/t rule 0 ruleExpression: apps/v1 deployments (Deployment): undefined field 'foo' (column 14)"}},
		{name: "plain select after an optional then orValue", apiVersion: "v1", resources: []string{"configmaps"},
			expr: "object.?metadata.orValue(object.metadata).bogus == ''",
			want: []string{"error: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap): undefined field 'bogus' (column 42)"}},
		{name: "messageExpression", apiVersion: "v1", resources: []string{"configmaps"},
			expr: "true", // the message below is checked too
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 messageExpression: v1 configmaps (ConfigMap): object.?status (column 7): ConfigMap declares no field 'status'"}},
		{name: "two resources, one declares the field", apiVersion: "v1", resources: []string{"configmaps", "pods"},
			expr: "object.?status.?phase.orValue('') != 'Failed'"},
		{name: "two resources, neither declares the field", apiVersion: "v1", resources: []string{"configmaps", "secrets"},
			expr: "!has(object.status)",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: v1 configmaps (ConfigMap), v1 secrets (Secret): has(object.status) (column 5): none of them declares field 'status': has() is always false"}},
		{name: "wildcard, some declare the field", apiVersion: "*", resources: []string{"*"},
			expr: "object.?status.?conditions.orValue([]).all(c, c.?status.orValue('') == 'True')"},
		{name: "wildcard, a plain select of a field some lack", apiVersion: "example.com/*", resources: []string{"*"},
			expr: "object.status.ready",
			want: []string{"error: GlobalHealthRuleSet/t rule 0 ruleExpression: example.com/v1 things (Thing): undefined field 'status' (column 7)"}},
		{name: "wildcard, none declares the field", apiVersion: "example.com/*", resources: []string{"*"},
			expr: "object.?statuz.?ready.orValue(true)",
			want: []string{"warning: GlobalHealthRuleSet/t rule 0 ruleExpression: example.com/v1 things (Thing), example.com/v1 widgets (Widget): object.?statuz (column 7): none of them declares field 'statuz': the selection always yields none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rule := extv1alpha1.RuleSpec{APIVersion: tc.apiVersion, Resources: tc.resources, RuleExpression: tc.expr}
			if tc.name == "messageExpression" {
				rule.MessageExpression = "object.?status.?message.orValue('not ready')"
			}
			assertRuleFindings(t, src, rule, tc.want)
		})
	}
}
