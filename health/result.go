package health

import (
	"fmt"

	"github.com/google/cel-go/common/types/ref"
)

// Kinds of the two rule set types, as they appear in Result.RuleSet, CompileError.Kind
// and the general failure message.
const (
	KindGlobalHealthRuleSet = "GlobalHealthRuleSet"
	KindHealthRuleSet       = "HealthRuleSet"
)

// Outcome is the verdict of the rules on one object.
type Outcome int

const (
	// Pass means that every applicable rule returned true, or that no rule applies.
	Pass Outcome = iota
	// Fail means that an applicable rule returned false; it gives the message.
	Fail
	// Error means that an applicable rule could not be evaluated: CEL returned an
	// error, ran out of its cost budget, or returned something other than a bool.
	Error
)

// String returns Pass, Fail or Error.
func (o Outcome) String() string {
	switch o {
	case Pass:
		return "Pass"
	case Fail:
		return "Fail"
	case Error:
		return "Error"
	default:
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
}

// Result is the verdict of the rules on one object (docs/design.md,
// "Result", "Rule order" and "Messages").
type Result struct {
	// Outcome is Pass, Fail or Error.
	Outcome Outcome
	// Message is "" on Pass; on Fail the value of the deciding rule's
	// messageExpression, or "health rule <i> of <Kind>/<name> not satisfied" when it
	// has none, fails or returns a non-string; on Error "evaluation error: <CEL error>".
	// It is already cut by TruncateMessage (at most 1024 runes).
	Message string
	// RuleSet names the set of the deciding rule: "GlobalHealthRuleSet/<name>" or
	// "HealthRuleSet/<namespace>/<name>" ("HealthRuleSet/<name>" when the set has no
	// namespace). "" when no rule decided (Pass).
	RuleSet string
	// RuleIndex is the 0-based index of the deciding rule in its set's spec.rules;
	// -1 when no rule decided (Pass).
	RuleIndex int
	// DecidedBy names the rule that decided a Fail or an Error and why; nil on Pass and
	// on results that no rule decided (an object that could not be read). It is shared
	// between results and must not be modified.
	DecidedBy *Decider
	// RulesApplied is the number of selected rules whose apiVersion and resources match
	// the object, whether or not evaluation reached them, less the wildcard rules that
	// pass it by its apiVersion alone without reading it (Evaluator.RulesApplied): 0 on
	// a Pass means that no rule judged the object (it is Healthy only because nothing
	// judges it).
	RulesApplied int
	// Terminal is set on a Fail whose deciding rule's failedExpression returned true:
	// the failure is final, and DeriveState makes the object Degraded at once
	// (DecidedBy.Cause is CauseFailed).
	Terminal bool
}

// Cause says how a rule decided an entry's state: RuleFailed, DeadlinePassed, Failed or
// EvaluationError. Evaluate gives RuleFailed, Failed or EvaluationError; Explain turns a
// RuleFailed into DeadlinePassed when the deadline made the entry Degraded.
type Cause string

const (
	// CauseRuleFailed: the rule's ruleExpression returned false (Outcome Fail).
	CauseRuleFailed Cause = "RuleFailed"
	// CauseEvaluationError: the rule's ruleExpression could not be evaluated, ran out
	// of its cost budget or returned a non-bool (Outcome Error).
	CauseEvaluationError Cause = "EvaluationError"
	// CauseDeadlinePassed: the rule's ruleExpression returned false and the Release's
	// spec.healthAssessment.deadline has passed since the object first failed, so the
	// entry is Degraded rather than Progressing (docs/design.md, "Per-entry
	// evaluation"). Only Explain gives it.
	CauseDeadlinePassed Cause = "DeadlinePassed"
	// CauseFailed: the rule's ruleExpression returned false and its failedExpression
	// returned true: the failure is terminal, and the entry is Degraded at once
	// (Result.Terminal).
	CauseFailed Cause = "Failed"
	// CauseFailedFast: the rule's ruleExpression returned false, and the Release's
	// spec.healthAssessment.failFast made the entry Degraded at once because the
	// workload's diagnosis is terminal (package diagnosis). Only FailFast gives it.
	CauseFailedFast Cause = "FailedFast"
)

// Decider names the rule that decided a result, for explanations (the decidedBy of
// /health, convoyctl release status and health eval) and lint. Its JSON is
// {"kind","namespace","name","rule","cause"}.
//
// +k8s:openapi-gen=true
type Decider struct {
	// Kind is GlobalHealthRuleSet or HealthRuleSet.
	Kind string `json:"kind"`
	// Namespace of a HealthRuleSet; "" for a GlobalHealthRuleSet.
	Namespace string `json:"namespace"`
	// Name of the rule set.
	Name string `json:"name"`
	// Rule is the 0-based index of the rule in the set's spec.rules.
	Rule int `json:"rule"`
	// Cause is RuleFailed, Failed or EvaluationError in a Result; Explain may make a
	// RuleFailed DeadlinePassed, FailFast may make it FailedFast.
	Cause Cause `json:"cause"`
}

// passedResult is the Result of an object that passes n applicable rules.
func passedResult(n int) Result { return Result{Outcome: Pass, RuleIndex: -1, RulesApplied: n} }

// result builds the Result decided by this rule.
func (r *compiledRule) result(o Outcome, message string, applied int) Result {
	d := r.failed
	if o == Error {
		d = r.errored
	}
	return Result{Outcome: o, Message: TruncateMessage(message), RuleSet: r.ruleSet, RuleIndex: r.index, DecidedBy: d,
		RulesApplied: applied}
}

// terminalResult builds the Fail of this rule when its failedExpression said the failure
// is terminal.
func (r *compiledRule) terminalResult(message string, applied int) Result {
	res := r.result(Fail, message, applied)
	res.DecidedBy, res.Terminal = r.terminal, true
	return res
}

// typeName names the CEL type of v for an error message.
func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}
