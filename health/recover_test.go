package health

import (
	"context"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
)

// panicProgram is a program whose evaluation panics, as a library bug would.
type panicProgram struct{ cel.Program }

func (panicProgram) Eval(any) (ref.Val, *cel.EvalDetails, error) { panic("boom") }
func (panicProgram) ContextEval(context.Context, any) (ref.Val, *cel.EvalDetails, error) {
	panic("boom")
}

// TestPanicIsUnknown: a panic inside one evaluation becomes that object's evaluation
// error (Unknown), and the evaluator keeps working.
func TestPanicIsUnknown(t *testing.T) {
	t.Parallel()
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	ev := &Evaluator{env: env, exact: map[matchKey][]*compiledRule{
		{apiVersion: "v1", resource: "pods"}: {{ruleSet: "GlobalHealthRuleSet/g", rule: panicProgram{},
			errored: &Decider{Kind: KindGlobalHealthRuleSet, Name: "g", Cause: CauseEvaluationError}}},
	}}
	for range 2 {
		r := ev.Evaluate("v1", "pods", map[string]any{})
		if r.Outcome != Error || r.Message != "evaluation error: internal error: boom" || r.DecidedBy.Cause != CauseEvaluationError {
			t.Fatalf("got %+v", r)
		}
	}
}
