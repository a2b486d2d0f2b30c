package health_test

import (
	"testing"

	"github.com/kumodo/convoy-observer/health"
)

// TestNilObjectIsEmptyMap: a nil object is evaluated as {}, not as null: it is a map,
// of size 0, equal to {}, and its fields are absent.
func TestNilObjectIsEmptyMap(t *testing.T) {
	t.Parallel()
	ev := mustEvaluator(t, configMapRule("type(object) == map && size(object) == 0 && object == {} && !has(object.status)", "'not {}'"))
	assertResult(t, ev.Evaluate("v1", "configmaps", nil), health.Pass, "")
}
