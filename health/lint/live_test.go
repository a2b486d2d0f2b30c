package lint_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/lint"
)

// TestLintTypesLiveObjects: lint types object as the evaluator reads it, and agrees with
// evaluation on live objects: it accepts what evaluates (fields under
// x-kubernetes-preserve-unknown-fields, an embedded resource's labels, a number compared
// with an int, a nullable field compared with null, a property name that needs an index)
// and rejects what fails (a number multiplied by a double, which fails for every whole
// value; the API server's escaped property names, always "no such key").
func TestLintTypesLiveObjects(t *testing.T) {
	t.Parallel()
	yes := true
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	spec := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"values":      {Type: "object", XPreserveUnknownFields: &yes, Properties: map[string]apiextensionsv1.JSONSchemaProps{"a": {Type: "string"}}},
		"template":    {Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: nil, Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object"}}},
		"successRate": {Type: "number"},
		"owner":       {Type: "string", Nullable: true},
		"strategy":    obj(map[string]apiextensionsv1.JSONSchemaProps{"max-unavailable": {Type: "integer"}}),
	})
	crd := apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Schema: &apiextensionsv1.CustomResourceValidation{
			OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}}}}}}
	src, err := lint.NewCRDs([]apiextensionsv1.CustomResourceDefinition{crd})
	if err != nil {
		t.Fatal(err)
	}
	live := []map[string]any{
		{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": map[string]any{
			"values": map[string]any{"anything": map[string]any{"deep": "x"}}, "template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}}},
			"successRate": int64(1), "owner": nil, "strategy": map[string]any{"max-unavailable": int64(1)}}},
		{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": map[string]any{
			"values": map[string]any{"anything": map[string]any{"deep": "y"}}, "template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "db"}}},
			"successRate": 0.5, "owner": "me", "strategy": map[string]any{"max-unavailable": int64(0)}}},
	}
	for _, c := range []struct {
		expr   string
		accept bool
	}{
		{"object.spec.values.anything.deep == 'x'", true},
		{"object.spec.template.metadata.labels['app'] == 'web'", true},
		{"object.spec.successRate == 1", true},
		{"object.spec.successRate > 0.9", true},
		{"object.spec.owner == null", true},
		{"object.spec.strategy['max-unavailable'] > 0", true},
		{"object.spec.successRate * 100.0 > 50.0", false},
		{"object.spec.strategy.max__dash__unavailable > 0", false},
	} {
		rule := extv1alpha1.RuleSpec{APIVersion: "example.com/v1", Resources: []string{"widgets"}, RuleExpression: c.expr}
		set := extv1alpha1.GlobalHealthRuleSet{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{rule}}}
		set.Name = "w"
		findings := lint.Lint([]extv1alpha1.GlobalHealthRuleSet{set}, nil, src)
		accepted := !lint.HasErrors(findings)
		if accepted != c.accept {
			t.Errorf("%s: lint accepted=%v, want %v: %s", c.expr, accepted, c.accept, join(findings))
		}
		ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{set}, nil)
		if err != nil {
			t.Fatal(err)
		}
		evalErrors := 0
		for _, o := range live {
			if r := ev.Evaluate("example.com/v1", "widgets", o); r.Outcome == health.Error {
				evalErrors++
				if c.accept {
					t.Errorf("%s: lint accepts it but it fails on a live object: %s", c.expr, r.Message)
				}
			}
		}
		if !c.accept && evalErrors == 0 {
			t.Errorf("%s: lint rejects it but it evaluates on every object", c.expr)
		}
	}
}
