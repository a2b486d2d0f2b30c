package health

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/kumodo/convoy-observer/health/celbound"
)

// objectVariable is the name of the only CEL variable that a rule sees: the live
// resource, typed dyn (docs/design.md, "Rules").
const objectVariable = "object"

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
	// tracking, the per-call cost limit, the regex optimization) are what the bound
	// replaces.
	compile *cel.Env
	// guard plans every program with the bound of package celbound, in an environment
	// with compile's declarations and function implementations but none of its program
	// options: every call is charged from its arguments before it runs and, in an
	// expression with comprehensions, every step.
	guard *celbound.Guard
	// activations are the pooled activations of evaluations (Evaluator.evaluate).
	activations sync.Pool
}

var (
	envOnce sync.Once
	envVal  *celEnv
	envErr  error
)

// newEnv returns the CEL environment of health rules: Kubernetes' base environment
// (environment.MustBaseEnvSet at CompatibilityVersion: the libraries of CRD validation
// rules and ValidatingAdmissionPolicies, optional types, cross-type numeric comparisons)
// with one dyn variable, object, and its guard. It is built once and shared: the
// environments and the guard are immutable, and the pool is safe for concurrent use.
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
	guard, err := celbound.NewGuard(compile, objectVariable)
	if err != nil {
		return nil, err
	}
	env := &celEnv{compile: compile, guard: guard}
	env.activations.New = func() any { return guard.NewActivation() }
	return env, nil
}
