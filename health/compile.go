package health

import (
	"fmt"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
)

// compile parses and type-checks expr in Kubernetes' base environment and plans it with
// the call guard (guard.go), which charges every call from its arguments before it runs
// and, in an expression with comprehensions, every step of every iteration. An
// expression without comprehensions does at most as many steps as it has nodes besides
// its calls, so only its calls are charged.
//
// The type of the result is not checked here: docs/design.md ("Result", "Messages") makes a ruleExpression that
// returns a non-bool an evaluation error and a non-string messageExpression the general
// message, so Evaluate checks the values it gets instead.
func compile(env *celEnv, expr string) (cel.Program, error) {
	prg, _, err := compileChecked(env, expr)
	return prg, err
}

// compileChecked is compile that also returns the checked expression.
func compileChecked(env *celEnv, expr string) (cel.Program, *celast.AST, error) {
	ast, iss := env.compile.Compile(expr)
	if iss.Err() != nil {
		return nil, nil, iss.Err()
	}
	prg, err := plan(env, ast.NativeRep())
	if err != nil {
		return nil, nil, err
	}
	return prg, ast.NativeRep(), nil
}

// plan plans a checked expression with the call guard (see compile).
func plan(env *celEnv, checked *celast.AST) (cel.Program, error) {
	guard := guardDecorator(env.overloads, hasComprehension(checked.Expr()))
	prg, err := env.plan.PlanProgram(checked, cel.CustomDecoratorV2(guard), cel.InterruptCheckFrequency(interruptCheckFrequency))
	if err != nil {
		return nil, fmt.Errorf("planning the program: %w", err)
	}
	return prg, nil
}

// interruptCheckFrequency is how many comprehension iterations or charged calls pass
// between two looks at the context of EvaluateContext.
const interruptCheckFrequency = 64

// hasComprehension reports whether e contains a comprehension (all, exists, map,
// filter, cel.bind, ...): the only way an expression repeats work.
func hasComprehension(e celast.Expr) bool {
	found := false
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.ComprehensionKind {
			found = true
		}
	}))
	return found
}
