package celbound_test

import (
	"context"
	"errors"
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/celbound"
)

// heavyEvaluator has three ConfigMap rules that cost a good part of CostLimit on
// heavyObject (comprehensions over 300 elements, counted step by step), then a cheap
// failing rule.
func heavyEvaluator(t *testing.T) *health.Evaluator {
	t.Helper()
	heavy := "object.items.all(a, object.items.exists(b, b == a))"
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil,
		configMapRule("object.items.map(a, a * 2).all(x, x >= 0)", ""),
		configMapRule("object.items.filter(a, a % 2 == 0).size() >= 0", ""),
		configMapRule(heavy+" || true", ""),
		configMapRule("false", "'cheap rule decided'"),
	)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func heavyObject() map[string]any {
	items := make([]any, 300)
	for i := range items {
		items[i] = int64(i)
	}
	return map[string]any{"items": items}
}

// TestMeterBudget: a Meter bounds the summed cost of the evaluations through it. With no
// budget they all decide and their cost is counted; with a budget of a few expressions the
// evaluation that would overrun it ends with ErrBudgetExhausted, never with an evaluation
// error, and the Meter never charges more than its budget.
func TestMeterBudget(t *testing.T) {
	t.Parallel()
	ev, obj := heavyEvaluator(t), heavyObject()

	free := celbound.NewMeter(0)
	r, u, err := ev.EvaluateMetered(context.Background(), free, "v1", "configmaps", obj)
	if err != nil {
		t.Fatal(err)
	}
	assertResult(t, r, health.Fail, "cheap rule decided")
	if u.Cost == 0 || u.Cost != free.Used() {
		t.Fatalf("usage %d, meter %d: want the same non-zero cost", u.Cost, free.Used())
	}
	if u.CPU <= 0 || free.CPU() != u.CPU {
		t.Fatalf("CPU %v, meter %v: want the same positive time", u.CPU, free.CPU())
	}
	one := u.Cost // the cost of one full evaluation

	budget := one + one/2 // one evaluation fits, the second does not
	m := celbound.NewMeter(budget)
	if _, _, err := ev.EvaluateMetered(context.Background(), m, "v1", "configmaps", obj); err != nil {
		t.Fatalf("first evaluation within the budget: %v", err)
	}
	r, u2, err := ev.EvaluateMetered(context.Background(), m, "v1", "configmaps", obj)
	if !errors.Is(err, celbound.ErrBudgetExhausted) {
		t.Fatalf("second evaluation: got %+v, %v; want ErrBudgetExhausted", r, err)
	}
	if m.Used() > budget {
		t.Fatalf("meter charged %d, more than its budget %d", m.Used(), budget)
	}
	if u2.Cost == 0 || !m.Exhausted() && u2.Cost >= one {
		t.Fatalf("cut evaluation: cost %d of %d, exhausted %v", u2.Cost, one, m.Exhausted())
	}
	// Once exhausted, nothing more runs.
	if _, u3, err := ev.EvaluateMetered(context.Background(), m, "v1", "configmaps", obj); !errors.Is(err, celbound.ErrBudgetExhausted) || (m.Exhausted() && u3.Cost != 0) {
		t.Fatalf("third evaluation: %v, cost %d", err, u3.Cost)
	}

	// Evaluate without a Meter still has only the per-expression limit.
	assertResult(t, ev.Evaluate("v1", "configmaps", obj), health.Fail, "cheap rule decided")
}
