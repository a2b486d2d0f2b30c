package health_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// hugeConjunction is the expression of the review: 1,260 comparisons joined by &&,
// 16,378 characters (the CRD allows 16,384), 6,299 nodes. Type-checking it took 0.34 s
// of CPU, and 256 such rules in one namespaced HealthRuleSet about 80 s.
func hugeConjunction() string {
	return strings.Join(slices.Repeat([]string{"object.a==1"}, 1260), "&&")
}

// TestExpressionTooLargeRefused: an expression whose parsed syntax tree has more than
// health.MaxExpressionNodes nodes is refused before it is type-checked, with a
// *CompileError that names the rule, the size, the limit and what to do, and whose
// message does not quote the whole expression.
func TestExpressionTooLargeRefused(t *testing.T) {
	t.Parallel()
	expr := hugeConjunction()
	for _, tc := range []struct {
		name  string
		rule  extv1alpha1.RuleSpec
		field string
	}{
		{"ruleExpression", configMapRule(expr, ""), health.FieldRuleExpression},
		{"messageExpression", configMapRule("true", "'x' + string("+expr+")"), health.FieldMessageExpression},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := health.NewEvaluator(nil, []extv1alpha1.HealthRuleSet{
				localSet("tenant", "big", nil, configMapRule("true", ""), tc.rule)})
			var ce *health.CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v (%T), want a *health.CompileError", err, err)
			}
			var se *health.SizeError
			if !errors.As(err, &se) || se.Limit != health.MaxExpressionNodes || se.Size <= se.Limit || se.RuleSet {
				t.Fatalf("got %v, want a *health.SizeError of one expression over %d nodes", err, health.MaxExpressionNodes)
			}
			if ce.Kind != health.KindHealthRuleSet || ce.Namespace != "tenant" || ce.Name != "big" || ce.RuleIndex != 1 || ce.Field != tc.field {
				t.Errorf("got %+v, want HealthRuleSet tenant/big rule 1 %s", *ce, tc.field)
			}
			msg := err.Error()
			for _, want := range []string{"HealthRuleSet/tenant/big rule 1: " + tc.field, "nodes", "limit of 1000 nodes", "split it into several rules"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not contain %q", msg, want)
				}
			}
			if n := utf8.RuneCountInString(msg); n > 1024 {
				t.Errorf("message is %d characters, want at most 1024: the expression must not be quoted whole", n)
			}
		})
	}
}

// conjunction is n comparisons joined by &&: 5n-1 nodes.
func conjunction(n int) string {
	return strings.Join(slices.Repeat([]string{"object.a==1"}, n), "&&")
}

// TestRuleSetTooLargeRefused: a set whose expressions' squared sizes sum to more than
// health.MaxRuleSetSquaredNodes is refused before any of them is type-checked, at the
// rule that takes it over the limit, although each expression is under
// health.MaxExpressionNodes.
func TestRuleSetTooLargeRefused(t *testing.T) {
	t.Parallel()
	expr := conjunction(190) // 949 nodes
	if n, err := health.ExpressionNodes(expr); err != nil || n != 949 {
		t.Fatalf("ExpressionNodes = %d, %v; want 949", n, err)
	}
	var rules []extv1alpha1.RuleSpec
	for len(rules)*949*949 <= health.MaxRuleSetSquaredNodes {
		rules = append(rules, configMapRule(expr, ""))
	}
	_, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("big", nil, rules...)}, nil)
	var ce *health.CompileError
	var se *health.SizeError
	if !errors.As(err, &ce) || !errors.As(err, &se) || !se.RuleSet || se.Limit != health.MaxRuleSetSquaredNodes || se.Size != 949*949*len(rules) {
		t.Fatalf("got %v, want a *health.SizeError of the set (%d squared nodes)", err, 949*949*len(rules))
	}
	if ce.RuleIndex != len(rules)-1 || ce.Field != health.FieldRuleExpression {
		t.Errorf("got rule %d %s, want rule %d ruleExpression", ce.RuleIndex, ce.Field, len(rules)-1)
	}
	if !strings.Contains(err.Error(), "split the rules into several rule sets") {
		t.Errorf("message %q does not say what to do", err)
	}
}

// TestCompileErrorOrder: sizes are checked before anything is type-checked, but the
// first expression that does not compile, in rule order, is still the one reported: a
// type error in rule 0 before a syntax error in rule 1, and a size error anywhere
// before both.
func TestCompileErrorOrder(t *testing.T) {
	t.Parallel()
	undeclared, syntax := configMapRule("self.ready", ""), configMapRule("true", "'a' +")
	ev := func(rules ...extv1alpha1.RuleSpec) (*health.CompileError, error) {
		_, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, rules...)}, nil)
		var ce *health.CompileError
		if !errors.As(err, &ce) {
			t.Fatalf("got %v, want a *health.CompileError", err)
		}
		return ce, err
	}
	if ce, err := ev(undeclared, syntax); ce.RuleIndex != 0 || !strings.Contains(err.Error(), "undeclared reference") {
		t.Errorf("got %v, want rule 0's type error", err)
	}
	if ce, err := ev(syntax, undeclared); ce.RuleIndex != 0 || ce.Field != health.FieldMessageExpression || !strings.Contains(err.Error(), "Syntax error") {
		t.Errorf("got %v, want rule 0's syntax error", err)
	}
	var se *health.SizeError
	if ce, err := ev(undeclared, configMapRule(hugeConjunction(), "")); ce.RuleIndex != 1 || !errors.As(err, &se) {
		t.Errorf("got %v, want rule 1's size error", err)
	}
}

// TestCompileErrorMessageBounded: CEL quotes the source line of an issue and marks its
// column with dots; for a one-line expression of 16,000 characters (multi-byte ones
// here) the message keeps a window around the column and stays valid UTF-8.
func TestCompileErrorMessageBounded(t *testing.T) {
	t.Parallel()
	expr := "object.a == '" + strings.Repeat("é", 8000) + "' && objectx.a"
	_, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, configMapRule(expr, ""))}, nil)
	if err == nil {
		t.Fatal("compiled")
	}
	msg := err.Error()
	if n := utf8.RuneCountInString(msg); n > 1024 || !utf8.ValidString(msg) {
		t.Errorf("message of %d runes (valid UTF-8: %v), want at most 1024: %q", n, utf8.ValidString(msg), msg)
	}
	for _, want := range []string{`ruleExpression "object.a == 'éééé`, "…\": ", "ERROR: <input>:1:8019: undeclared reference to 'objectx'", "éé' && objectx.a\n", "^"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not contain %q", msg, want)
		}
	}
}

// BenchmarkCompileAtLimits: the CPU that the limits allow, with the densest content
// found (each [0] adds six type variables in two nodes): one expression just under
// MaxExpressionNodes, and a set of such expressions just under MaxRuleSetSquaredNodes.
func BenchmarkCompileAtLimits(b *testing.B) {
	var elems []string
	for n := 1; n+5 < health.MaxExpressionNodes; n += 5 {
		elems = append(elems, "object[0][0]")
	}
	dense := "[" + strings.Join(elems, ",") + "] == []"
	nodes, err := health.ExpressionNodes(dense)
	if err != nil || nodes > health.MaxExpressionNodes {
		b.Fatalf("%d nodes, %v", nodes, err)
	}
	one := configMapRule(dense, "")
	set := slices.Repeat([]extv1alpha1.RuleSpec{one}, health.MaxRuleSetSquaredNodes/(nodes*nodes))
	for _, bc := range []struct {
		name  string
		rules []extv1alpha1.RuleSpec
	}{{"expression", []extv1alpha1.RuleSpec{one}}, {"ruleset", set},
		{"review-256x16KB", slices.Repeat([]extv1alpha1.RuleSpec{configMapRule(hugeConjunction(), "")}, 256)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_, _ = health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, bc.rules...)}, nil)
			}
		})
	}
}

// TestLocalSelectionTooLargeRefused: each HealthRuleSet within its own limit, but the
// sets that one Release selects sum to more than health.MaxLocalSelectionSquaredNodes:
// the evaluator is refused before anything is type-checked, naming the set that took
// the selection over, the size, the limit and what to do. GlobalHealthRuleSets (the
// platform's) do not count.
func TestLocalSelectionTooLargeRefused(t *testing.T) {
	t.Parallel()
	// An expression of about 900 nodes: 4 of them fit in a set, 9 in a selection (three
	// sets of three rules), not 12.
	expr := strings.Join(slices.Repeat([]string{"object.a==1"}, 180), "&&")
	nodes, err := health.ExpressionNodes(expr)
	if err != nil || nodes > health.MaxExpressionNodes || 4*nodes*nodes > health.MaxRuleSetSquaredNodes {
		t.Fatalf("the test's expression has %d nodes (%v)", nodes, err)
	}
	var sets []extv1alpha1.HealthRuleSet
	var globals []extv1alpha1.GlobalHealthRuleSet
	for _, name := range []string{"a", "b", "c", "d"} {
		sets = append(sets, localSet("tenant", name, nil, configMapRule(expr, ""), configMapRule(expr, ""), configMapRule(expr, "")))
		globals = append(globals, globalSet(name, nil, configMapRule(expr, ""), configMapRule(expr, ""), configMapRule(expr, "")))
	}
	if _, err := health.NewEvaluator(globals, sets[:2]); err != nil {
		t.Fatalf("two local sets and four global ones: %v", err)
	}
	_, err = health.NewEvaluator(nil, sets)
	var ce *health.CompileError
	var se *health.SizeError
	if !errors.As(err, &ce) || !errors.As(err, &se) || !se.Selection || ce.Name != "d" || se.Limit != health.MaxLocalSelectionSquaredNodes ||
		!strings.Contains(err.Error(), "select fewer of them") {
		t.Fatalf("four local sets: %v; want the selection refused at set d (three fit)", err)
	}
}
