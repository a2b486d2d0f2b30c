package health_test

import (
	"reflect"
	"testing"

	"github.com/kumodo/convoy-observer/health"
)

// TestRulesNeverSeeWriteBookkeeping: a rule gets the same object whether it was read
// from the loop's cache (managedFields and the last-applied annotation stripped) or
// directly (both present): Evaluate removes them, without modifying the caller's object.
func TestRulesNeverSeeWriteBookkeeping(t *testing.T) {
	direct := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name":          "cm",
			"managedFields": []any{map[string]any{"manager": "kubectl"}},
			"annotations":   map[string]any{health.LastAppliedAnnotation: `{"big":"copy"}`, "keep": "me"},
		},
	}
	onlyLastApplied := map[string]any{"metadata": map[string]any{
		"name": "cm", "annotations": map[string]any{health.LastAppliedAnnotation: "{}"}}}
	cached := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "annotations": map[string]any{"keep": "me"}}}
	before := deepCopy(direct)
	for _, c := range []struct {
		expr string
		obj  map[string]any
	}{
		{"!has(object.metadata.managedFields)", direct},
		{"!('kubectl.kubernetes.io/last-applied-configuration' in object.metadata.annotations)", direct},
		{"object.metadata.annotations.keep == 'me' && size(object.metadata.annotations) == 1", direct},
		{"object.metadata.annotations.keep == 'me' && size(object.metadata.annotations) == 1", cached},
		{"!has(object.metadata.annotations)", onlyLastApplied},
	} {
		ev := mustEvaluator(t, configMapRule(c.expr, ""))
		assertResult(t, ev.Evaluate("v1", "configmaps", c.obj), health.Pass, "")
	}
	if !reflect.DeepEqual(direct, before) {
		t.Errorf("Evaluate modified the object: %v", direct)
	}
}

func deepCopy(v map[string]any) map[string]any {
	out := map[string]any{}
	for k, e := range v {
		if m, ok := e.(map[string]any); ok {
			out[k] = deepCopy(m)
		} else {
			out[k] = e
		}
	}
	return out
}
