package health

import (
	"fmt"
)

// Names of the expressions of a rule, as in RuleSpec's JSON, used by CompileError.
const (
	FieldRuleExpression    = "ruleExpression"
	FieldMessageExpression = "messageExpression"
	FieldFailedExpression  = "failedExpression"
)

// CompileError is the error of NewEvaluator when one expression of one rule does not
// compile: a syntax or type-check error, an expression or a set too large to type-check
// (*SizeError), a ruleExpression whose static type is neither bool nor dyn, or a
// messageExpression whose static type is neither string nor dyn.
// It fails the whole evaluator (docs/design.md, "Assessment" step 2: a compile
// error stops the assessment of the full Release). Find it with errors.As.
type CompileError struct {
	// Kind is GlobalHealthRuleSet or HealthRuleSet.
	Kind string
	// Namespace of a HealthRuleSet; "" for a GlobalHealthRuleSet.
	Namespace string
	// Name of the rule set.
	Name string
	// RuleIndex is the 0-based index of the rule in spec.rules.
	RuleIndex int
	// Field is FieldRuleExpression, FieldMessageExpression or FieldFailedExpression.
	Field string
	// Expression is the text of the expression that failed.
	Expression string
	// Err is CEL's error (its issues, with line and column; every line cut to 160 runes),
	// a *SizeError when the expression or its set is too large to type-check, or the
	// type mismatch.
	Err error
}

// maxQuotedExpression bounds, in runes, the expression that CompileError.Error quotes.
const maxQuotedExpression = 100

// Error returns one message naming the set, the rule index, the expression (its first
// 99 runes and "…" when it is longer than 100) and CEL's message, for example
// `GlobalHealthRuleSet/convoy-defaults rule 2: ruleExpression "object.a +": ERROR: ...`.
// CEL's message is bounded too (every line of it to 160 runes, the whole to 1024), so
// the message of a 16 KB expression stays short in conditions, Events and logs.
func (e *CompileError) Error() string {
	return fmt.Sprintf("%s rule %d: %s %q: %v",
		ruleSetID(e.Kind, e.Namespace, e.Name), e.RuleIndex, e.Field, truncate(e.Expression, maxQuotedExpression), e.Err)
}

// Unwrap returns Err.
func (e *CompileError) Unwrap() error { return e.Err }

// ruleSetID is the value of Result.RuleSet: Kind/name, with the namespace between the
// two when there is one (Kind/namespace/name), so two HealthRuleSets of the same name
// in different namespaces stay apart.
func ruleSetID(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}
