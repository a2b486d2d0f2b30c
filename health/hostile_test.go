package health_test

import (
	"strings"
	"testing"
	"time"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// costExceeded is the message of an evaluation stopped by its budget.
const costExceeded = "evaluation error: operation cancelled: actual cost limit exceeded"

// TestAmplifyReplaceCase: testdata/rules-engine/amplify-replace (three nested replace
// calls, each multiplying the length by 1000) ends as Unknown with a cost error, fast,
// instead of killing the process with out-of-memory.
func TestAmplifyReplaceCase(t *testing.T) {
	t.Parallel()
	global, local := manifesttest.RuleSets(t, testdataPath(t, "rules-engine", "amplify-replace.rules.yaml"))
	ev, err := health.NewEvaluator(global, local)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	obj := manifesttest.Object(t, testdataPath(t, "rules-engine", "amplify-replace.object.yaml"))
	start := time.Now()
	r := ev.Evaluate("v1", "configmaps", obj.Object)
	assertResult(t, r, health.Error, costExceeded)
	if r.DecidedBy == nil || r.DecidedBy.Cause != health.CauseEvaluationError || r.DecidedBy.Name != "tenant-rules" ||
		r.DecidedBy.Namespace != "tenant-a" || r.DecidedBy.Kind != health.KindHealthRuleSet || r.DecidedBy.Rule != 0 {
		t.Errorf("DecidedBy = %+v", r.DecidedBy)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d) // a hang guard, not a speed goal (see make bench)
	}
}

// TestHostileCallsOfTheIssue: join over a list built from a 300 KB object and indexOf
// scans over a 900 KB object end with the cost error.
func TestHostileCallsOfTheIssue(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 900<<10)
	items := make([]any, 3000)
	for i := range items {
		items[i] = strings.Repeat("y", 100)
	}
	obj := map[string]any{"data": map[string]any{"big": big}, "items": items}
	for _, expr := range []string{
		// join: every element 1000 times.
		"object.items.map(a, object.items.join(',')).size() > 0",
		// indexOf: a scan per element of the object.
		"object.items.all(i, object.data.big.indexOf(i) < 0)",
		"object.data.big.lastIndexOf(object.data.big.substring(1)) > 0",
	} {
		ev := mustEvaluator(t, configMapRule(expr, ""))
		assertResult(t, ev.Evaluate("v1", "configmaps", obj), health.Error, costExceeded)
	}
}

// mustEvaluator compiles one global set "g" with the given rules.
func mustEvaluator(t testing.TB, rules ...extv1alpha1.RuleSpec) *health.Evaluator {
	t.Helper()
	ev, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, rules...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
