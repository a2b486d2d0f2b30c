package health

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// MaxExpressionNodes is the most nodes that the parsed syntax tree of one expression may
// have: every literal, variable, field selection, operator and function call is one
// node, and a macro (all, exists, map, filter, has, ...) counts the nodes it expands to
// (`object.a == 1` has 4). CEL's type checker spends time that grows with the square of
// the nodes (every call of a generic function such as ==, in, size or [ ] adds type
// variables that every later call copies), so a larger expression is refused after
// parsing, before it is type-checked, with a *SizeError. The largest shipped rule has
// 583 nodes and compiles in about 5 ms of CPU; an expression at the limit takes about
// 10 ms, and up to about 70 ms when it is nothing but chained indexes (object[0][0]).
// docs/rules.md ("The bound of compiling") explains the limits to rule authors.
const MaxExpressionNodes = 1000

// MaxRuleSetSquaredNodes bounds the type-checking cost of one rule set: the sum, over
// the expressions of its rules, of their nodes squared (see MaxExpressionNodes) may be
// at most 4,000,000, the cost of four expressions at the limit, so that one set cannot
// cost seconds to compile however many rules it has (at most about 0.3 s of CPU). The
// largest shipped set (gateway-api, 11 rules of about 400 nodes) sums to 1,767,868.
const MaxRuleSetSquaredNodes = 4 * MaxExpressionNodes * MaxExpressionNodes

// MaxLocalSelectionSquaredNodes bounds the type-checking cost of the HealthRuleSets that
// one Release selects (its namespace's sets, which its tenant writes): their squared
// nodes (see MaxRuleSetSquaredNodes) may sum to at most twice a set's limit, about 0.6 s
// of CPU, however many sets the tenant creates. An edit of any one of them compiles the
// whole selection again, outside the fair share of evaluations, so without it one tenant
// could make every edit cost seconds of the shared observer's CPU. GlobalHealthRuleSets
// are the platform's and are not counted.
const MaxLocalSelectionSquaredNodes = 2 * MaxRuleSetSquaredNodes

// SizeError is the Err of a CompileError whose expression has more than
// MaxExpressionNodes nodes, that takes its rule set over MaxRuleSetSquaredNodes, or whose
// set takes a Release's selection of HealthRuleSets over MaxLocalSelectionSquaredNodes.
// Nothing of the set has been type-checked then.
type SizeError struct {
	// Size is the expression's number of nodes, or with RuleSet the sum of the squared
	// numbers of nodes of the set's expressions up to and including this one, or with
	// Selection that sum over the selected HealthRuleSets up to and including this set.
	Size int
	// Limit is MaxExpressionNodes, MaxRuleSetSquaredNodes with RuleSet, or
	// MaxLocalSelectionSquaredNodes with Selection.
	Limit int
	// RuleSet is true when the set is over its limit.
	RuleSet bool
	// Selection is true when the selected HealthRuleSets together are over their limit.
	Selection bool
}

// Error says the size, the limit and what to do.
func (e *SizeError) Error() string {
	if e.Selection {
		return fmt.Sprintf("the HealthRuleSets that the Release selects, up to this one, sum to %d squared nodes (what type-checking costs), "+
			"more than the limit of %d per Release: select fewer of them (spec.healthAssessment.localRuleSetSelector) or make them smaller", e.Size, e.Limit)
	}
	if e.RuleSet {
		return fmt.Sprintf("the rule set's expressions up to this one sum to %d squared nodes (the nodes of each expression squared: "+
			"what type-checking costs), more than the limit of %d per rule set: split the rules into several rule sets", e.Size, e.Limit)
	}
	return fmt.Sprintf("the expression has %d nodes, more than the limit of %d nodes per expression "+
		"(type-checking costs grow with the square of the size): split it into several rules", e.Size, e.Limit)
}

// maxIssueLine bounds, in runes, each line of the error of an expression that does not
// parse or type-check. CEL quotes the source line of every issue and marks its column
// with a line of dots, both as long as the line (16 KB for a long one-line expression).
const maxIssueLine = 160

// issuesError is the error of failed parsing or type-checking of expr: CEL's text when
// every line of it fits in maxIssueLine runes. Otherwise every issue is written as CEL
// writes it ("ERROR: <input>:LINE:COLUMN: message", the source line, a caret under the
// column) with the message cut to maxIssueLine runes and, of the source line, only a
// window of about 120 runes around the column. Either way the whole is cut to
// MaxMessageLength runes (TruncateMessage).
func issuesError(iss *cel.Issues, expr string) error {
	text := iss.Err().Error()
	fits := true
	for line := range strings.SplitSeq(text, "\n") {
		fits = fits && utf8.RuneCountInString(line) <= maxIssueLine
	}
	if fits {
		return errors.New(TruncateMessage(text))
	}
	lines := strings.Split(expr, "\n")
	var b strings.Builder
	for i, e := range iss.Errors() {
		if b.Len() > v1alpha1.MaxMessageLength*utf8.UTFMax {
			break // TruncateMessage cuts it anyway
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		line, col := e.Location.Line(), e.Location.Column()
		fmt.Fprintf(&b, "ERROR: <input>:%d:%d: %s", line, col+1, truncate(e.Message, maxIssueLine))
		if line < 1 || line > len(lines) || col < 0 {
			continue
		}
		src := []rune(strings.ReplaceAll(lines[line-1], "\t", " "))
		from, to := max(0, col-60), min(len(src), col+60)
		before, after := "", ""
		if from > 0 {
			before = truncationMark
		}
		if to < len(src) {
			after = truncationMark
		}
		fmt.Fprintf(&b, "\n | %s%s%s\n | %s^", before, string(src[from:to]), after,
			strings.Repeat(".", utf8.RuneCountInString(before)+min(col, len(src))-from))
	}
	return errors.New(TruncateMessage(b.String()))
}

// parse parses expr (cheap: linear in its length) and returns it with its size in nodes.
func parse(env *celEnv, expr string) (*cel.Ast, int, error) {
	ast, iss := env.compile.Parse(expr)
	if iss.Err() != nil {
		return nil, 0, issuesError(iss, expr)
	}
	return ast, countNodes(ast.NativeRep().Expr()), nil
}

// ExpressionNodes parses expr as NewEvaluator does and returns the number of nodes of
// its syntax tree, the size that MaxExpressionNodes and MaxRuleSetSquaredNodes bound. The error
// is CEL's (shortened) when expr does not parse. It does not type-check: the cost is
// linear in the length of expr.
func ExpressionNodes(expr string) (int, error) {
	env, err := newEnv()
	if err != nil {
		return 0, err
	}
	_, nodes, err := parse(env, expr)
	return nodes, err
}

// countNodes returns the number of nodes of e.
func countNodes(e celast.Expr) int {
	n := 0
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(celast.Expr) { n++ }))
	return n
}

// compileChecked parses expr, refuses it with a *SizeError when it has more than
// MaxExpressionNodes nodes, and compiles it (see check). It returns the program and the
// checked expression.
func compileChecked(env *celEnv, expr string) (cel.Program, *celast.AST, error) {
	parsed, nodes, err := parse(env, expr)
	if err != nil {
		return nil, nil, err
	}
	if nodes > MaxExpressionNodes {
		return nil, nil, &SizeError{Size: nodes, Limit: MaxExpressionNodes}
	}
	return check(env, parsed)
}

// check type-checks a parsed expression in Kubernetes' base environment and plans it
// with the bound (celbound.Guard.Plan), which charges every call from its arguments
// before it runs and, in an expression with comprehensions, every step of every
// iteration. The caller bounds the size of parsed (MaxExpressionNodes): type-checking
// costs grow with its square.
//
// The type of the result is not checked here: docs/design.md ("Result", "Messages") makes a ruleExpression that
// returns a non-bool an evaluation error and a non-string messageExpression the general
// message, so Evaluate checks the values it gets instead.
func check(env *celEnv, parsed *cel.Ast) (cel.Program, *celast.AST, error) {
	ast, iss := env.compile.Check(parsed)
	if iss.Err() != nil {
		return nil, nil, issuesError(iss, parsed.Source().Content())
	}
	prg, err := env.guard.Plan(ast.NativeRep())
	if err != nil {
		return nil, nil, err
	}
	return prg, ast.NativeRep(), nil
}

// parsedRule is the parsed expressions of one rule; message and failed are nil when it
// has none.
type parsedRule struct {
	rule, message, failed *cel.Ast
}

// parseSet parses the expressions of a set's rules in order and refuses, with a
// *CompileError whose Err is a *SizeError, the first expression larger than
// MaxExpressionNodes or that takes the set over MaxRuleSetSquaredNodes, so that nothing
// too large is type-checked. It stops at the first expression that does not parse and
// returns the rules parsed before it with that expression's *CompileError: the caller
// type-checks those rules first, so the first expression that does not compile, in rule
// order, is the one reported.
func parseSet(env *celEnv, kind, namespace, name string, rules []extv1alpha1.RuleSpec) ([]parsedRule, *CompileError) {
	parsed := make([]parsedRule, 0, len(rules))
	total := 0
	for i := range rules {
		var p parsedRule
		for _, f := range []struct {
			field string
			expr  string
			ast   **cel.Ast
		}{{FieldRuleExpression, rules[i].RuleExpression, &p.rule}, {FieldMessageExpression, rules[i].MessageExpression, &p.message},
			{FieldFailedExpression, rules[i].FailedExpression, &p.failed}} {
			if f.field != FieldRuleExpression && f.expr == "" {
				continue
			}
			fail := &CompileError{Kind: kind, Namespace: namespace, Name: name, RuleIndex: i, Field: f.field, Expression: f.expr}
			ast, nodes, err := parse(env, f.expr)
			switch total += nodes * nodes; {
			case err != nil:
				fail.Err = err
				return parsed, fail
			case nodes > MaxExpressionNodes:
				fail.Err = &SizeError{Size: nodes, Limit: MaxExpressionNodes}
				return parsed, fail
			case total > MaxRuleSetSquaredNodes:
				fail.Err = &SizeError{Size: total, Limit: MaxRuleSetSquaredNodes, RuleSet: true}
				return parsed, fail
			}
			*f.ast = ast
		}
		parsed = append(parsed, p)
	}
	return parsed, nil
}

// CheckRuleSetSize parses the expressions of a rule set's rules, as NewEvaluator does
// before it type-checks any, and returns the *CompileError (its Err a *SizeError) of the
// first expression with more than MaxExpressionNodes nodes or that takes the set over
// MaxRuleSetSquaredNodes. It returns nil when the sizes are within the limits, and also
// when an expression that does not parse comes first (NewEvaluator reports that one).
// kind is KindGlobalHealthRuleSet or KindHealthRuleSet; namespace is "" for a
// GlobalHealthRuleSet. It does not type-check: the cost is linear in the expressions'
// length.
func CheckRuleSetSize(kind, namespace, name string, rules []extv1alpha1.RuleSpec) error {
	env, err := newEnv()
	if err != nil {
		return err
	}
	if _, ce := parseSet(env, kind, namespace, name, rules); ce != nil && errors.As(ce.Err, new(*SizeError)) {
		return ce
	}
	return nil
}

// checkLocalSelection refuses, with a *CompileError whose Err is a *SizeError with
// Selection, the first set (in the evaluator's order) that takes the selected
// HealthRuleSets over MaxLocalSelectionSquaredNodes. It only parses (linear in the
// expressions' length). A set that does not parse, or that is over a limit of its own
// (an expression or the set too large), is left to addSet, which names that error.
func checkLocalSelection(env *celEnv, local []extv1alpha1.HealthRuleSet, order []int) error {
	total := 0
	for _, i := range order {
		set := &local[i]
		sum, first := 0, -1
		for j := range set.Spec.Rules {
			r := &set.Spec.Rules[j]
			for _, expr := range []string{r.RuleExpression, r.MessageExpression, r.FailedExpression} {
				if expr == "" {
					continue
				}
				_, nodes, err := parse(env, expr)
				if err != nil || nodes > MaxExpressionNodes {
					return nil //nolint:nilerr // compiling reports the error itself
				}
				if sum += nodes * nodes; first < 0 && total+sum > MaxLocalSelectionSquaredNodes {
					first = j
				}
			}
		}
		if sum > MaxRuleSetSquaredNodes {
			return nil
		}
		if total += sum; first >= 0 {
			r := &set.Spec.Rules[first]
			return &CompileError{Kind: KindHealthRuleSet, Namespace: set.Namespace, Name: set.Name, RuleIndex: first,
				Field: FieldRuleExpression, Expression: r.RuleExpression,
				Err: &SizeError{Size: total, Limit: MaxLocalSelectionSquaredNodes, Selection: true}}
		}
	}
	return nil
}
