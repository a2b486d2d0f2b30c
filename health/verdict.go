package health

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/cel-go/common/types"

	"github.com/kumodo/convoy-observer/health/celbound"
)

// The verdict of the applicable rules on one object (docs/design.md, "Result", "Rule
// order" and "Messages"): evaluateRules runs them in order, evalFailed looks for a
// terminal failure, failureMessage gives a failing rule's message.

// evaluateRules is evaluate once the rules are matched and the activation taken.
func (e *Evaluator) evaluateRules(ctx context.Context, m *celbound.Meter, act *celbound.Activation, match matched, apiVersion string, object map[string]any) (Result, error) {
	rules := match.rules
	// Rules decided at match time pass this object when its apiVersion field is the
	// one they were decided for (decide.go). The view (view.go, which never changes the
	// apiVersion) is built when the first rule runs: not at all when every rule is
	// decided.
	// Those rules do not count in RulesApplied; when the apiVersion field differs,
	// every rule is evaluated and counts.
	decided, applied := match.passes, match.applied
	if decided != nil {
		if v, _ := object["apiVersion"].(string); v != apiVersion {
			decided, applied = nil, len(rules)
		}
	}
	viewed := false
	// first is the first Fail: once an object fails a rule, the rules after it are
	// evaluated only to find a terminal failure (a failedExpression that returns true),
	// so only those with a failedExpression run; without one the first Fail decides.
	var first Result
	failed := false
	for i, r := range rules {
		if ctx != nil && ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if m != nil && m.Exhausted() {
			return Result{}, celbound.ErrBudgetExhausted
		}
		if (decided != nil && decided[i]) || (failed && r.failedExpr == nil) {
			continue
		}
		if !viewed {
			act.Bind(ruleView(object))
			viewed = true
		}
		out, err := act.Eval(ctx, r.rule)
		if ctx != nil && ctx.Err() != nil {
			// Interrupted: whatever the expression returned (an && or || can absorb an
			// interrupted comprehension) is not a verdict.
			return Result{}, ctx.Err()
		}
		if err != nil {
			if errors.Is(err, celbound.ErrBudgetExhausted) {
				return Result{}, err
			}
			if failed {
				continue // not false: no terminal failure
			}
			return r.result(Error, evaluationErrorPrefix+err.Error(), applied), nil
		}
		ok, isBool := out.(types.Bool)
		if !isBool {
			if failed {
				continue
			}
			return r.result(Error, fmt.Sprintf("%sruleExpression returned %s, not bool", evaluationErrorPrefix, typeName(out)), applied), nil
		}
		if ok {
			continue
		}
		if r.failedExpr != nil {
			res, decides, err := r.evalFailed(ctx, act, applied)
			if err != nil {
				return Result{}, err
			}
			if decides {
				return res, nil
			}
		}
		if !failed {
			msg := r.failureMessage(ctx, act)
			if ctx != nil && ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			first, failed = r.result(Fail, msg, applied), true
		}
	}
	if failed {
		return first, nil
	}
	return passedResult(applied), nil
}

// evalFailed evaluates the failedExpression of a rule whose ruleExpression returned
// false. decides is true when it decides the object: true (a terminal Fail with the
// rule's message) or an evaluation error (an Error, as for ruleExpression: it errors or
// returns a non-bool). false leaves the failure an ordinary one. err is ctx's error or
// celbound.ErrBudgetExhausted.
func (r *compiledRule) evalFailed(ctx context.Context, act *celbound.Activation, applied int) (_ Result, decides bool, _ error) {
	out, err := act.Eval(ctx, r.failedExpr)
	if ctx != nil && ctx.Err() != nil {
		return Result{}, false, ctx.Err()
	}
	if err != nil {
		if errors.Is(err, celbound.ErrBudgetExhausted) {
			return Result{}, false, err
		}
		return r.result(Error, evaluationErrorPrefix+"failedExpression: "+err.Error(), applied), true, nil
	}
	final, isBool := out.(types.Bool)
	switch {
	case !isBool:
		return r.result(Error, fmt.Sprintf("%sfailedExpression returned %s, not bool", evaluationErrorPrefix, typeName(out)), applied), true, nil
	case !bool(final):
		return Result{}, false, nil
	}
	msg := r.failureMessage(ctx, act)
	if ctx != nil && ctx.Err() != nil {
		return Result{}, false, ctx.Err()
	}
	return r.terminalResult(msg, applied), true, nil
}

// failureMessage evaluates the rule's messageExpression, or falls back to the general
// message when there is none, it errors, or it does not return a string.
func (r *compiledRule) failureMessage(ctx context.Context, act *celbound.Activation) string {
	if r.message == nil {
		return r.generalMsg
	}
	out, err := act.Eval(ctx, r.message)
	if err != nil {
		return r.generalMsg
	}
	s, ok := out.(types.String)
	if !ok {
		return r.generalMsg
	}
	return string(s)
}
