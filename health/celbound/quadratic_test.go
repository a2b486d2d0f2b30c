package celbound_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestQuadraticListFunctionsBounded: the set functions and distinct compare every
// element with every other; over 20,000 distinct elements (each found last) they must
// be stopped before they run, within the bounds of one evaluation.
func TestQuadraticListFunctionsBounded(t *testing.T) {
	items := make([]any, 20000)
	for i := range items {
		items[i] = fmt.Sprintf("item-%06d", i)
	}
	obj := map[string]any{"items": items}
	for _, expr := range []string{
		"sets.contains(object.items, object.items.reverse())",
		"sets.equivalent(object.items, object.items.reverse())",
		"sets.intersects(object.items, ['none'] + object.items.reverse()) || true",
		"object.items.distinct().size() > 0",
	} {
		ev := mustEvaluator(t, configMapRule(expr, ""))
		res, cpu, alloc := measure(ev, obj)
		if cpu > maxEvalCPU*cpuScale || alloc > maxEvalAlloc*allocScale || !strings.Contains(res.Message, "cost limit exceeded") {
			t.Errorf("%s: %v CPU, %d MiB, %v %q; want the cost limit within the bounds", expr, cpu, alloc>>20, res.Outcome, res.Message)
		}
	}
}

// TestListGrowthThroughConcatenation: list + list is lazy in CEL, so 200
// concatenations of a 100,000-element list would stand for 20 million elements; each +
// is charged the elements it adds, so the expression stops within the bounds.
func TestListGrowthThroughConcatenation(t *testing.T) {
	items := make([]any, 100000)
	for i := range items {
		items[i] = "a"
	}
	expr := "(" + strings.Repeat("object.items + ", 199) + "object.items) == ['x']"
	ev := mustEvaluator(t, configMapRule(expr, ""))
	res, cpu, alloc := measure(ev, map[string]any{"items": items})
	if cpu > maxEvalCPU*cpuScale || alloc > maxEvalAlloc*allocScale || !strings.Contains(res.Message, "cost limit exceeded") {
		t.Errorf("%v CPU, %d MiB, %v %q; want the cost limit within the bounds", cpu, alloc>>20, res.Outcome, res.Message)
	}
}
