package health_test

import (
	"os"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// TestCase18aIntVsDouble evaluates case 18a decoded as live objects arrive (integers as
// int64, what manifest.DecodeObjects and the dynamic client give) and as a plain
// sigs.k8s.io/yaml or encoding/json decode into map[string]any gives (every number a
// float64). CEL keeps int and double apart: comparisons work across them (heterogeneous
// equality, cross-type numeric comparisons), but arithmetic with an int literal and
// type() do not. The default rules only compare, so they pass either way; rules that do
// arithmetic break on doubles. That is why every loader must keep int64.
func TestCase18aIntVsDouble(t *testing.T) {
	t.Parallel()
	path := testdataPath(t, "objects", "18a-cel-int-vs-double.yaml")
	live := manifesttest.Object(t, path).Object
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doubles map[string]any
	if err := sigsyaml.Unmarshal(raw, &doubles); err != nil {
		t.Fatal(err)
	}
	if _, ok := live["spec"].(map[string]any)["replicas"].(int64); !ok {
		t.Fatalf("manifest.DecodeObjects: spec.replicas is %T, want int64", live["spec"].(map[string]any)["replicas"])
	}
	if _, ok := doubles["spec"].(map[string]any)["replicas"].(float64); !ok {
		t.Fatalf("sigs.k8s.io/yaml: spec.replicas is %T, want float64", doubles["spec"].(map[string]any)["replicas"])
	}

	type want struct {
		outcome health.Outcome
		message string
	}
	const general = "health rule 0 of GlobalHealthRuleSet/probe not satisfied"
	cases := []struct {
		name            string
		rule, message   string // "" rule: the convoy-defaults set
		asInt, asDouble want
	}{{
		// observedGeneration 3 == generation 3 either way; `spec.replicas == 0` is
		// 3.0 == 0, false without an error (heterogeneous equality): Pass both ways.
		name:     "convoy-defaults",
		asInt:    want{health.Pass, ""},
		asDouble: want{health.Pass, ""},
	}, {
		// int + int is fine; double + int has no overload: an evaluation error.
		name:     "arithmetic",
		rule:     "object.spec.replicas + 1 == 4",
		asInt:    want{health.Pass, ""},
		asDouble: want{health.Error, "evaluation error: no such overload"},
	}, {
		name:     "type",
		rule:     "type(object.spec.replicas) == int",
		asInt:    want{health.Pass, ""},
		asDouble: want{health.Fail, general},
	}, {
		// string(3.0) formats as "3" too, so this one does not tell them apart.
		name:     "string",
		rule:     "string(object.spec.replicas) == '3'",
		asInt:    want{health.Pass, ""},
		asDouble: want{health.Pass, ""},
	}, {
		// The messageExpression multiplies: on doubles it fails, so the general
		// message replaces it.
		name:     "message arithmetic",
		rule:     "false",
		message:  "'wants ' + string(object.spec.replicas * 2)",
		asInt:    want{health.Fail, "wants 6"},
		asDouble: want{health.Fail, general},
	}}
	defaults := defaultsEvaluator(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := defaults
			if tc.rule != "" {
				var err error
				rule := configMapRule(tc.rule, tc.message)
				rule.APIVersion, rule.Resources = "apps/v1", []string{"deployments"}
				if ev, err = health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("probe", nil, rule)}, nil); err != nil {
					t.Fatal(err)
				}
			}
			t.Run("int64", func(t *testing.T) {
				assertResult(t, ev.Evaluate("apps/v1", "deployments", live), tc.asInt.outcome, tc.asInt.message)
			})
			t.Run("float64", func(t *testing.T) {
				assertResult(t, ev.Evaluate("apps/v1", "deployments", doubles), tc.asDouble.outcome, tc.asDouble.message)
			})
		})
	}
}
