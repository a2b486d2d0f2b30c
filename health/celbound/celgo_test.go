package celbound

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"
)

// TestCelGoCouplings fails loudly when cel-go changes under the couplings of celgo.go:
// read the doc there before raising checkedCelGoVersion.
func TestCelGoCouplings(t *testing.T) {
	// Test binaries carry no module versions: read the module's go.mod.
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	found := ""
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/google/cel-go" {
			found = f[1]
		}
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "github.com/google/cel-go" && f[2] == "=>" {
			found = "replaced by " + strings.Join(f[3:], " ")
		}
	}
	if found != checkedCelGoVersion {
		t.Errorf("cel-go is %s, but the guard's couplings to its internals were checked against %s: "+
			"follow the upgrade check in health/celbound/celgo.go, then raise checkedCelGoVersion", found, checkedCelGoVersion)
	}

	// An environment with one dyn variable, as health's; the guard's planning
	// environment is the one that matters.
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.OptionalTypes())
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGuard(env, "object")
	if err != nil {
		t.Fatal(err)
	}
	// has() is planned as the node isTestOnlyNode recognizes.
	ast, iss := env.Compile("has(object.a.b)")
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	var types []string
	sawTestOnly := false
	record := func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		types = append(types, reflect.TypeOf(i).String())
		sawTestOnly = sawTestOnly || isTestOnlyNode(i)
		return i, nil
	}
	if _, err := g.env.PlanProgram(ast.NativeRep(), cel.CustomDecoratorV2(record)); err != nil {
		t.Fatal(err)
	}
	if !sawTestOnly {
		t.Errorf("cel-go no longer plans has() as %s (planned: %v): fastattr.go would answer has(object.a.b) with the field's value; update testOnlyNodeType", testOnlyNodeType, types)
	}

	// list + list returns the lazy list isConcatList recognizes.
	ast, iss = env.Compile("[1, 2] + [3]")
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := g.env.PlanProgram(ast.NativeRep())
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if !isConcatList(out) {
		t.Errorf("list + list is now %T, not %v: sizeOf would copy the whole list to size it; update concatListType", out, concatListType)
	}

	// The guard's dispatch gives cel-go's results: see TestGuardedProgramsAgreeWithCEL
	// (differential_test.go), which runs every rule of the library both ways.
}
