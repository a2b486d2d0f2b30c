package lint_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/lint"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// genObject generates a live object valid under schema s: required fields always,
// others often; numbers as a live object holds them (a whole number is an int64);
// strings from words that rules compare with (condition types and statuses, phases).
func genObject(r *rand.Rand, s *apiextensionsv1.JSONSchemaProps, depth int) any {
	if s == nil {
		return nil
	}
	if s.Nullable && r.IntN(6) == 0 {
		return nil
	}
	if s.XIntOrString {
		if r.IntN(2) == 0 {
			return int64(r.IntN(5))
		}
		return fmt.Sprintf("%d%%", r.IntN(100))
	}
	if len(s.Enum) > 0 {
		var v any
		_ = jsonUnmarshal(s.Enum[r.IntN(len(s.Enum))].Raw, &v)
		return wholeAsInt(v)
	}
	words := []string{"True", "False", "Unknown", "Ready", "Available", "Progressing", "Degraded", "Healthy",
		"Running", "Succeeded", "Failed", "Stalled", "Reconciling", "Established", "x", ""}
	switch s.Type {
	case "string":
		return words[r.IntN(len(words))]
	case "integer":
		return int64(r.IntN(5))
	case "number":
		if r.IntN(2) == 0 {
			return int64(r.IntN(5))
		}
		return float64(r.IntN(100)) / 10
	case "boolean":
		return r.IntN(2) == 0
	case "array":
		if depth > 8 || s.Items == nil || s.Items.Schema == nil {
			return []any{}
		}
		n := r.IntN(3)
		out := make([]any, 0, n)
		for range n {
			out = append(out, genObject(r, s.Items.Schema, depth+1))
		}
		return out
	}
	// object
	out := map[string]any{}
	if depth > 8 {
		return out
	}
	required := map[string]bool{}
	for _, k := range s.Required {
		required[k] = true
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if required[k] || r.IntN(4) != 0 {
			out[k] = genObject(r, &p, depth+1)
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		for i := range r.IntN(3) {
			out[fmt.Sprintf("k%d", i)] = genObject(r, s.AdditionalProperties.Schema, depth+1)
		}
	}
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && len(s.Properties) == 0 {
		out["anything"] = words[r.IntN(len(words))]
	}
	return out
}

// TestLintAgreesWithEvaluation is the differential test of lint: for every rule of the
// library and every resource it names that a vendored CRD defines, objects valid under
// the CRD's schema are generated and the rule evaluated on them. No rule that lint
// accepts may have a type error on them ("no such overload"), and every rule that lint
// rejects must fail on some of them; the agreement figures are logged. (The library is
// lint-clean, so its rules exercise the first half; TestLintTypesLiveObjects the second.)
func TestLintAgreesWithEvaluation(t *testing.T) {
	paths, _ := filepath.Glob("testdata/crds/*.yaml")
	all := manifesttest.CRDs(t, paths...)
	src, err := lint.NewCRDs(all)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{} // "group/version resource"
	for i := range all {
		for _, v := range all[i].Spec.Versions {
			if v.Served && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				schemas[all[i].Spec.Group+"/"+v.Name+" "+all[i].Spec.Names.Plural] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	sets, _ := filepath.Glob("../library/*.yaml")
	n, every := 12, 1
	if testing.Short() {
		n, every = 4, 3 // a third of the pairs
	}
	seen := 0
	r := rand.New(rand.NewPCG(2026, 12))
	var pairs, acceptedOK, acceptedTypeErr, rejectedFails, rejectedClean int
	for _, path := range sets {
		g, _ := manifesttest.RuleSets(t, path)
		for _, set := range g {
			for i, rule := range set.Spec.Rules {
				for _, res := range rule.Resources {
					s := schemas[rule.APIVersion+" "+res]
					if s == nil {
						continue
					}
					if seen++; seen%every != 0 {
						continue
					}
					one := rule
					one.Resources = []string{res}
					single := extv1alpha1.GlobalHealthRuleSet{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{one}}}
					single.Name = set.Name
					accepted := !lint.HasErrors(lint.Lint([]extv1alpha1.GlobalHealthRuleSet{single}, nil, lint.Sources{&lint.Builtin{}, src}))
					ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{single}, nil)
					if err != nil {
						t.Fatalf("%s rule %d: %v", set.Name, i, err)
					}
					typeErr := ""
					for range n {
						obj, _ := genObject(r, s, 0).(map[string]any)
						obj["apiVersion"], obj["kind"] = rule.APIVersion, "X"
						obj["metadata"] = map[string]any{"name": "x", "generation": int64(1 + r.IntN(2))}
						res := ev.Evaluate(rule.APIVersion, res, obj)
						if res.Outcome == health.Error && (strings.Contains(res.Message, "no such overload") ||
							strings.Contains(res.Message, "no matching overload")) {
							typeErr = res.Message
						}
					}
					pairs++
					switch {
					case accepted && typeErr == "":
						acceptedOK++
					case accepted:
						acceptedTypeErr++
						t.Errorf("%s rule %d (%s %s): lint accepts it, evaluation: %s", set.Name, i, rule.APIVersion, res, typeErr)
					case typeErr != "":
						rejectedFails++
					default:
						rejectedClean++
						t.Errorf("%s rule %d (%s %s): lint rejects it, but it evaluates without a type error on every generated object", set.Name, i, rule.APIVersion, res)
					}
				}
			}
		}
	}
	t.Logf("%d rule×resource pairs with a vendored schema, %d objects each: lint accepts %d (%d without a type error), rejects %d (%d with a type error)",
		pairs, n, acceptedOK+acceptedTypeErr, acceptedOK, rejectedFails+rejectedClean, rejectedFails)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// wholeAsInt makes a whole float64 an int64, as on a live object.
func wholeAsInt(v any) any {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return int64(f)
	}
	return v
}
