package celbound_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kumodo/convoy-observer/health"
)

// TestQuantityExtremeExponents: quantities whose exponent made apimachinery's
// ParseQuantity run for minutes (kubernetes PRs #131063, #139412, #141203, #141306),
// read from an object, end within the bounds of one evaluation with the value the API
// server gives them: a tiny value is ±1n, a zero is 0, an exponent outside int32 is not
// a quantity, and a value of 1e10000 or more is refused.
func TestQuantityExtremeExponents(t *testing.T) {
	for _, c := range []struct {
		size, expr string
		outcome    health.Outcome
		message    string
	}{
		{"1e-2147483647", "isQuantity(object.spec.size)", health.Pass, ""},
		{"1e-2147483647", "quantity(object.spec.size).isGreaterThan(quantity('0'))", health.Pass, ""},
		{"1e-2147483647", "quantity(object.spec.size) == quantity('1n')", health.Pass, ""},
		{"-1e-2147483647", "quantity(object.spec.size) == quantity('-1n')", health.Pass, ""},
		{"0e-2147483647", "sign(quantity(object.spec.size)) == 0", health.Pass, ""},
		{"2E6024865272343", "!isQuantity(object.spec.size)", health.Pass, ""},
		{"2E6024865272343", "quantity(object.spec.size).isInteger()", health.Error,
			"evaluation error: quantities in health rules must be below 1e10000 and have an exponent within int32"},
		{"1e999999999", "quantity(object.spec.size).compareTo(quantity('1')) > 0", health.Error,
			"evaluation error: quantities in health rules must be below 1e10000 and have an exponent within int32"},
		{"1e9999", "quantity(object.spec.size).compareTo(quantity('1n')) > 0", health.Pass, ""},
		{"1e-2147483647", "[object.spec.size].all(s, quantity(s).isLessThan(quantity('1')))", health.Pass, ""},
		{strings.Repeat("9", 200000), "isQuantity(object.spec.size)", health.Error,
			"evaluation error: operation cancelled: actual cost limit exceeded"},
	} {
		ev := mustEvaluator(t, configMapRule(c.expr, ""))
		obj := map[string]any{"spec": map[string]any{"size": c.size}}
		res, cpu, alloc := measure(ev, obj)
		if res.Outcome != c.outcome || res.Message != c.message {
			t.Errorf("%s with size %.30q: got %v %q, want %v %q", c.expr, c.size, res.Outcome, res.Message, c.outcome, c.message)
		}
		if cpu > maxEvalCPU*cpuScale || alloc > maxEvalAlloc*allocScale {
			t.Errorf("%s with size %.30q: %v CPU, %d MiB allocated", c.expr, c.size, cpu, alloc>>20)
		}
	}
}

// TestRegexChargedByProgram: a regular expression is charged by the size of its
// compiled program times its input, not by the length of its pattern: an 18-byte
// pattern of 3,003 instructions over a 640 KiB value (15 s of CPU) is refused at the
// cost limit before it runs, where it was judged Healthy.
func TestRegexChargedByProgram(t *testing.T) {
	blob := strings.Repeat("abcdefghij", 64<<10)
	ev := mustEvaluator(t, configMapRule("!object.data.blob.matches('(?:.*[a-y]){1000}#')", ""))
	res, cpu, alloc := measure(ev, map[string]any{"data": map[string]any{"blob": blob}})
	assertResult(t, res, health.Error, costExceeded)
	if cpu > maxEvalCPU*cpuScale || alloc > maxEvalAlloc*allocScale {
		t.Errorf("%v CPU, %d MiB allocated", cpu, alloc>>20)
	}
	// The same pattern over a short value is fine.
	res = ev.Evaluate("v1", "configmaps", map[string]any{"data": map[string]any{"blob": strings.Repeat("a", 1000) + "#"}})
	assertResult(t, res, health.Fail, "health rule 0 of GlobalHealthRuleSet/g not satisfied")
}

// TestFindAllQuadraticStops: findAll searches again after every match, and each search
// can scan to the end of the input (`.*z|a` over a's: 7 s for 16 KiB). It is charged for
// every rune it reads and stops in the middle once the budget is gone, while the usual
// findAll over a long value passes.
func TestFindAllQuadraticStops(t *testing.T) {
	ev := mustEvaluator(t, configMapRule("object.data.a.findAll('.*z|a').size() > 0", ""))
	res, cpu, alloc := measure(ev, map[string]any{"data": map[string]any{"a": strings.Repeat("a", 16<<10)}})
	assertResult(t, res, health.Error, costExceeded)
	if cpu > maxEvalCPU*cpuScale || alloc > maxEvalAlloc*allocScale {
		t.Errorf("%v CPU, %d MiB allocated", cpu, alloc>>20)
	}
	digits := strings.Repeat("12345 abc ", 6<<10)
	ev = mustEvaluator(t, configMapRule("object.data.a.findAll('[0-9]+').size() == 6144", ""))
	assertResult(t, ev.Evaluate("v1", "configmaps", map[string]any{"data": map[string]any{"a": digits}}), health.Pass, "")
}

// TestFindAllAsRegexp: the guard's findAll, which searches from every match through a
// charged reader, gives what regexp's FindAllString gives, context assertions (^, \b,
// \B, (?m)^), empty matches and multi-byte runes included.
func TestFindAllAsRegexp(t *testing.T) {
	inputs := []string{"", "a", "abc abc", "ab\ncd\nef", "héllo wörld é", "aaa", "a1b22c333", "  x  ", "\n\n"}
	patterns := []string{"a", "a*", "^", "$", `\b`, `\B`, `(?m)^`, `(?m)$`, `\bab`, `b\b`, "x*", ".", "(?s).", `\w+`,
		"é|", "[0-9]*", `^\w`, `(?m)^\w`, "a|ab", "(a)(b)?", `(?U)a+`, ""}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		for _, in := range inputs {
			for _, n := range []int{-1, 0, 1, 2} {
				want := re.FindAllString(in, n)
				ev := mustEvaluator(t, configMapRule("object.data.s.findAll(object.data.p, object.data.n) == object.data.want", ""))
				wantList := make([]any, len(want))
				for i, w := range want {
					wantList[i] = w
				}
				obj := map[string]any{"data": map[string]any{"s": in, "p": p, "n": int64(n), "want": wantList}}
				if res := ev.Evaluate("v1", "configmaps", obj); res.Outcome != health.Pass {
					t.Errorf("findAll(%q, %q, %d): want %q: %v %s", in, p, n, want, res.Outcome, res.Message)
				}
			}
		}
	}
}

// TestEvaluateContextStopsMidExpression: EvaluateContext stops inside an expression once
// its context is done (it used to look only between expressions), and an interrupted
// comprehension absorbed by || is not a verdict.
func TestEvaluateContextStopsMidExpression(t *testing.T) {
	items := make([]any, 3000)
	for i := range items {
		items[i] = strings.Repeat("y", 10)
	}
	obj := map[string]any{"items": items}
	for _, expr := range []string{
		"object.items.all(i, !object.items.exists(j, j == 'z' + i))",
		"object.items.all(i, !object.items.exists(j, j == 'z' + i)) || true",
		"object.items.map(i, i + 'a').join().findAll('.*z|y').size() > 0",
	} {
		ev := mustEvaluator(t, configMapRule(expr, ""))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		start := time.Now()
		res, err := ev.EvaluateContext(ctx, "v1", "configmaps", obj)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: got %v %q, %v; want the context's error", expr, res.Outcome, res.Message, err)
		}
		if took > time.Second { // a hang guard, not a speed goal
			t.Errorf("%s: took %v after a 2 ms deadline", expr, took)
		}
	}
}
