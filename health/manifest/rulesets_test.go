package manifest_test

import (
	"strings"
	"testing"

	"github.com/kumodo/convoy-observer/health/manifest"
)

func TestDecodeRuleSets(t *testing.T) {
	t.Parallel()
	const header = "apiVersion: extensions.convoy.kumodo.io/v1alpha1\n"
	rule := "spec:\n  rules:\n  - {apiVersion: v1, resources: [pods], ruleExpression: 'true'}\n"
	cases := []struct {
		name       string
		in         string
		wantGlobal []string
		wantLocal  []string
		wantErr    string
	}{
		{name: "both kinds, multi-document",
			in:         header + "kind: GlobalHealthRuleSet\nmetadata: {name: g}\n" + rule + "---\n" + header + "kind: HealthRuleSet\nmetadata: {name: l, namespace: demo}\n" + rule,
			wantGlobal: []string{"g"}, wantLocal: []string{"demo/l"}},
		{name: "List",
			in: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: extensions.convoy.kumodo.io/v1alpha1\n  kind: GlobalHealthRuleSet\n  metadata: {name: a}\n  spec: {rules: []}\n" +
				"- apiVersion: extensions.convoy.kumodo.io/v1alpha1\n  kind: GlobalHealthRuleSet\n  metadata: {name: b}\n  spec: {rules: []}\n",
			wantGlobal: []string{"a", "b"}},
		{name: "typed list", in: header + "kind: HealthRuleSetList\nitems:\n- metadata: {name: x, namespace: ns}\n  spec: {rules: []}\n",
			wantLocal: []string{"ns/x"}},
		{name: "unknown kind", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			wantErr: `document 1: unknown kind "ConfigMap" of apiVersion "v1"`},
		{name: "wrong group", in: "apiVersion: example.com/v1\nkind: GlobalHealthRuleSet\nmetadata: {name: c}\n",
			wantErr: `unknown kind "GlobalHealthRuleSet" of apiVersion "example.com/v1"`},
		{name: "unknown field", in: header + "kind: GlobalHealthRuleSet\nmetadata: {name: g}\nspec:\n  rules:\n  - {apiVersion: v1, resources: [pods], ruleExpresion: 'true'}\n",
			wantErr: `GlobalHealthRuleSet "g": unknown field "spec.rules[0].ruleExpresion"`},
		{name: "field in the wrong case", in: header + "kind: GlobalHealthRuleSet\nmetadata: {name: g}\nSpec: {rules: []}\n",
			wantErr: `unknown field "Spec"`},
		{name: "not YAML", in: "kind: [", wantErr: "document 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, l, err := manifest.DecodeRuleSets(strings.NewReader(tc.in))
			if failed(t, err, tc.wantErr) {
				return
			}
			var gotGlobal, gotLocal []string
			for _, s := range g {
				gotGlobal = append(gotGlobal, s.Name)
			}
			for _, s := range l {
				gotLocal = append(gotLocal, s.Namespace+"/"+s.Name)
			}
			if strings.Join(gotGlobal, ",") != strings.Join(tc.wantGlobal, ",") || strings.Join(gotLocal, ",") != strings.Join(tc.wantLocal, ",") {
				t.Errorf("got %v %v, want %v %v", gotGlobal, gotLocal, tc.wantGlobal, tc.wantLocal)
			}
		})
	}
}

// TestJSONWholeNumbersAreInts: JSON 3.0 and 1e3 read back from a live object as the
// integers 3 and 1000; 2.5 stays a double.
