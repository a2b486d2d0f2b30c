package health

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/library"
)

// objectVariable is the name of the only CEL variable that a rule sees: the live
// resource, typed dyn (spec/health-rule-sets.txt, "Rules").
const objectVariable = "object"

// CostLimit is the runtime cost budget of one evaluation of one expression, in CEL cost
// units. It is Kubernetes' per-call limit for CEL validation rules (about 0.1 s of CPU);
// an expression that exceeds it stops with an evaluation error instead of running on.
const CostLimit = celconfig.PerCallLimit

// interruptCheckFrequency is how many comprehension iterations run between two checks
// of the cost budget; the same value the API server uses.
const interruptCheckFrequency = celconfig.CheckFrequency

var (
	baseEnvOnce sync.Once
	baseEnv     *cel.Env
	baseEnvErr  error
)

// newEnv returns the CEL environment of health rules. It mirrors the base environment
// of the Kubernetes 1.37 API server (k8s.io/apiserver/pkg/cel/environment), so a rule
// that works in a CRD validation rule or a ValidatingAdmissionPolicy works here too,
// minus the libraries that need a request (authz, JSON patch). The environment is
// immutable, so it is built once and shared.
func newEnv() (*cel.Env, error) {
	baseEnvOnce.Do(func() {
		baseEnv, baseEnvErr = cel.NewEnv(
			cel.Variable(objectVariable, cel.DynType),

			cel.HomogeneousAggregateLiterals(),
			cel.EagerlyValidateDeclarations(true),
			cel.DefaultUTCTimeZone(true),
			cel.CrossTypeNumericComparisons(true),
			cel.OptionalTypes(),
			cel.ASTValidators(
				cel.ValidateDurationLiterals(),
				cel.ValidateTimestampLiterals(),
				cel.ValidateRegexLiterals(),
				cel.ValidateHomogeneousAggregateLiterals(),
			),
			// Same as the API server: has() costs nothing, as before cel-go v0.17.7.
			cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),

			ext.Strings(ext.StringsVersion(2)),
			ext.Sets(),
			ext.Lists(ext.ListsVersion(3)),
			ext.TwoVarComprehensions(),

			library.URLs(),
			library.Regex(),
			library.Lists(library.ListsVersion(1)),
			library.Quantity(),
			library.IP(),
			library.CIDR(),
			library.Format(),
			library.SemverLib(library.SemverVersion(1)),
		)
		if baseEnvErr != nil {
			baseEnvErr = fmt.Errorf("building the CEL environment: %w", baseEnvErr)
		}
	})
	return baseEnv, baseEnvErr
}

// programOptions are the options of every compiled expression: cost tracking with
// Kubernetes' cost estimator for its libraries and a hard limit of CostLimit.
func programOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostTracking(&library.CostEstimator{}),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
		cel.CostLimit(CostLimit),
		cel.InterruptCheckFrequency(interruptCheckFrequency),
	}
}
