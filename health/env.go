package health

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/common/functions"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// objectVariable is the name of the only CEL variable that a rule sees: the live
// resource, typed dyn (docs/design.md, "Rules").
const objectVariable = "object"

// CostLimit is the cost budget of one evaluation of one expression, in CEL cost units.
// It is Kubernetes' per-call limit for CEL validation rules (about 0.1 s of CPU). Every
// library call is charged from its arguments before it runs (their sizes, and their
// content where the work depends on it: quantity exponents, regular expression programs;
// see bounds.go and docs/rules.md), so no single call can outgrow the budget; an
// expression that would exceed it stops with an evaluation error ending in "cost limit
// exceeded" instead of running on.
const CostLimit = celconfig.PerCallLimit

// CompatibilityVersion is the Kubernetes version whose CEL base environment the rules
// are compiled with (k8s.io/apiserver/pkg/cel/environment). It is pinned, not taken from
// the running binary, so a rule that compiles today keeps compiling when the libraries
// are upgraded; raise it on purpose to offer newer CEL libraries.
var CompatibilityVersion = version.MajorMinor(1, 37)

// celEnv is everything built once from the base environment.
type celEnv struct {
	// compile is the API server's base environment at CompatibilityVersion, extended
	// with the object variable. Expressions are parsed and type-checked here; no
	// program is planned here, since its program options (cel-go's runtime cost
	// tracking, the per-call cost limit, the regex optimization) are what the call guard
	// replaces.
	compile *cel.Env
	// plan holds the same declarations and function implementations as compile but
	// none of its program options: every program is planned here, with the call guard
	// (see guard.go), which charges every call from its arguments before it runs and, in
	// an expression with comprehensions, every step. An expression without
	// comprehensions does at most as many steps as it has nodes besides its calls, so
	// there only its calls are charged.
	plan *cel.Env
	// overloads maps overload IDs and function names to their implementations, for the
	// call guard.
	overloads map[string]*functions.Overload
}

var (
	envOnce sync.Once
	envVal  *celEnv
	envErr  error
)

// newEnv returns the CEL environments of health rules: Kubernetes' base environment
// (environment.MustBaseEnvSet at CompatibilityVersion: the libraries of CRD validation
// rules and ValidatingAdmissionPolicies, optional types, cross-type numeric comparisons)
// with one dyn variable, object. They are immutable, built once and shared.
func newEnv() (*celEnv, error) {
	envOnce.Do(func() {
		envVal, envErr = buildEnv()
		if envErr != nil {
			envErr = fmt.Errorf("building the CEL environment: %w", envErr)
		}
	})
	return envVal, envErr
}

func buildEnv() (*celEnv, error) {
	set, err := environment.MustBaseEnvSet(CompatibilityVersion).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable(objectVariable, cel.DynType)},
	})
	if err != nil {
		return nil, err
	}
	compile, err := set.Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	fns := compile.Functions()
	fdecls := make([]*decls.FunctionDecl, 0, len(fns))
	overloads := map[string]*functions.Overload{}
	for _, fn := range fns {
		fdecls = append(fdecls, fn)
		bindings, err := fn.Bindings()
		if err != nil {
			return nil, fmt.Errorf("function %s: %w", fn.Name(), err)
		}
		for _, b := range bindings {
			overloads[b.Operator] = b
		}
	}
	plan, err := cel.NewCustomEnv(
		cel.CustomTypeAdapter(compile.CELTypeAdapter()),
		cel.CustomTypeProvider(compile.CELTypeProvider()),
		cel.VariableDecls(compile.Variables()...),
		cel.FunctionDecls(fdecls...),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
	)
	if err != nil {
		return nil, fmt.Errorf("planning environment: %w", err)
	}
	return &celEnv{compile: compile, plan: plan, overloads: overloads}, nil
}
