package health

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
)

// The tests of this file evaluate a rule on an object and on the object pruned to
// FieldsOf's fields for the rule (what the observer's cache keeps): the outcome, message
// and terminal flag must be the same, whatever the expression does with object.

// pruneObject is an object with fields no always-kept path covers.
func pruneObject() map[string]any {
	return map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns", "labels": map[string]any{"app": "w"}},
		"spec": map[string]any{
			"replicas": int64(2),
			"x":        int64(1),
			"y":        map[string]any{"a": int64(1), "b": "two"},
			"containers": []any{
				map[string]any{"name": "c", "image": "img:1", "ports": []any{map[string]any{"containerPort": int64(80)}}},
			},
			"list":  []any{map[string]any{"a": int64(1), "z": int64(9)}},
			"str":   "hello",
			"other": "secret",
		},
		"status": map[string]any{"ready": true},
		"data":   map[string]any{"k": "v"},
		"top":    "t",
	}
}

type pruneCase struct {
	name, av, res, ruleAV string
	resources             []string
	expr, msg, failed     string
}

// samePrunedVerdict fails when c's rule judges pruneObject and its pruned copy
// differently; a rule that does not compile is skipped (logged).
func samePrunedVerdict(t *testing.T, c pruneCase) {
	t.Helper()
	if c.av == "" {
		c.av, c.res = "example.com/v1", "widgets"
	}
	if c.ruleAV == "" {
		c.ruleAV = c.av
	}
	if c.resources == nil {
		c.resources = []string{c.res}
	}
	global := ruleSet(extv1alpha1.RuleSpec{APIVersion: c.ruleAV, Resources: c.resources,
		RuleExpression: c.expr, MessageExpression: c.msg, FailedExpression: c.failed})
	global[0].Name = "prune"
	ev, err := NewEvaluator(global, nil)
	if err != nil {
		t.Logf("skip %s: does not compile: %.80v", c.name, err)
		return
	}
	f := FieldsOf(global, nil).For(c.av, c.res)
	full := pruneObject()
	pruned := runtime.DeepCopyJSON(pruneObject())
	f.Prune(pruned)
	a := ev.Evaluate(c.av, c.res, full)
	b := ev.Evaluate(c.av, c.res, pruned)
	if a.Outcome != b.Outcome || a.Message != b.Message || a.Terminal != b.Terminal {
		t.Errorf("%s: %q kept %s\n full:   %v %q\n pruned: %v %q", c.name, c.expr, f, a.Outcome, a.Message, b.Outcome, b.Message)
	} else {
		t.Logf("ok %s: %q kept %s -> %v %q", c.name, c.expr, f, a.Outcome, a.Message)
	}
}

// TestPrunedVerdictsRootScopedObject: .object (the root-scoped object) keeps what it
// reads, in comprehensions, messages, failed expressions and wildcard rules too;
// FieldsOf once missed it, since only the type-checker drops the dot.
func TestPrunedVerdictsRootScopedObject(t *testing.T) {
	for _, c := range []pruneCase{
		{name: "leading-dot", expr: ".object.spec.x == 1"},
		{name: "leading-dot-has", expr: "has(.object.data)"},
		{name: "leading-dot-msg", expr: "false", msg: "string(.object.spec.other)"},
		{name: "leading-dot-comprehension", expr: "[1].all(i, .object.data.k == 'v')"},
		{name: "leading-dot-opt", expr: ".object.?data.?k.orValue('') == 'v'"},
		{name: "leading-dot-wild", ruleAV: "*", resources: []string{"*"}, expr: ".object.spec.other == 'secret'"},
		{name: "leading-dot-failed", expr: "object.spec.x == 2", failed: ".object.top == 't'"},
	} {
		samePrunedVerdict(t, c)
	}
}

// TestPrunedVerdicts: macros, optionals, presence, computed keys, aliasing, wildcards,
// library functions, shadowed object, whole-value operators.
func TestPrunedVerdicts(t *testing.T) {
	for _, c := range []pruneCase{
		{name: "shadow-exists", expr: "[1].exists(object, object == 1) && object.spec.x == 1"},
		{name: "shadow-range", expr: "object.spec.containers.exists(object, object.name == 'c')"},
		{name: "shadow-bind", expr: "cel.bind(object, object.spec, object.x == 1)"},
		{name: "bind-alias", expr: "cel.bind(o, object, o.data.k == 'v')"},
		{name: "in-map", expr: "'other' in object.spec"},
		{name: "in-top", expr: "'data' in object"},
		{name: "size-spec", expr: "size(object.spec) == 7"},
		{name: "map-eq", expr: "object.spec.y == {'a': 1, 'b': 'two'}"},
		{name: "has-nested", expr: "has(object.spec.y.b)"},
		{name: "has-top", expr: "has(object.data)"},
		{name: "opt-chain", expr: "object.?spec.?y.?b.orValue('') == 'two'"},
		{name: "opt-of", expr: "optional.of(object).?data.hasValue()"},
		{name: "opt-index", expr: "object.spec.?containers[?0].?image.orValue('') == 'img:1'"},
		{name: "list-index-select", expr: "object.spec.containers[0].image == 'img:1'"},
		{name: "list-index-select2", expr: "object.spec.list[0].z == 9"},
		{name: "computed-key", expr: "object.spec['ot' + 'her'] == 'secret'"},
		{name: "computed-top", expr: "object['da' + 'ta'].k == 'v'"},
		{name: "ternary", expr: "(true ? object : {}).data.k == 'v'"},
		{name: "map-literal", expr: "{'o': object}.o.data.k == 'v'"},
		{name: "list-literal", expr: "[object.spec][0].other == 'secret'"},
		{name: "map-iter", expr: "object.spec.exists(k, k == 'other')"},
		{name: "top-iter", expr: "object.exists(k, k == 'data')"},
		{name: "all-top", expr: "object.all(k, k != 'top')"},
		{name: "exists-one", expr: "object.spec.list.exists_one(i, i.z == 9)"},
		{name: "map-macro", expr: "object.spec.list.map(i, i.z) == [9]"},
		{name: "filter", expr: "object.spec.list.filter(i, has(i.z)).size() == 1"},
		{name: "transformMap", expr: "object.spec.y.transformMap(k, v, string(v)) == {'a': '1', 'b': 'two'}"},
		{name: "all2", expr: "object.spec.all(k, v, k != 'other')"},
		{name: "dyn", expr: "dyn(object).spec.other == 'secret'"},
		{name: "dyn-whole", expr: "dyn(object) == dyn(object)"},
		{name: "type", expr: "type(object.spec.y) == map"},
		{name: "format", expr: "'%s'.format([object.spec.y]) != ''"},
		{name: "string-fn", expr: "object.spec.str.upperAscii() == 'HELLO'"},
		{name: "regex", expr: "object.spec.str.matches('^h')"},
		{name: "lists-lib", expr: "object.spec.list.all(i, i.z > 0) && [1,2].sum() == 3"},
		{name: "json-eq", expr: "object.spec.list == [{'a': 1, 'z': 9}]"},
		{name: "optmap", expr: "object.?spec.optMap(s, s.other).orValue('') == 'secret'"},
		{name: "keys-via-map", expr: "object.spec.y.map(k, k).size() == 2"},
		{name: "bytes-key", expr: "object.spec[b'other'] == 'secret'"},
		{name: "raw-key", expr: "object[r'data'][R\"k\"] == 'v'"},
		{name: "unicode-key", expr: "object['d\\u0061ta'].k == 'v'"},
		{name: "int-key", expr: "object.spec.containers[0].ports[0].containerPort == 80"},
		{name: "has-list", expr: "has(object.spec.list.a)"},
		{name: "opt-list", expr: "object.spec.?list.?a.hasValue()"},
		{name: "failed-expr", expr: "false", failed: "object.data.k == 'v'"},
		{name: "msg-expr", expr: "false", msg: "object.data.k + object.top"},
		{name: "wild-star", ruleAV: "*", resources: []string{"*"}, expr: "object.data.k == 'v'"},
		{name: "wild-suffix", ruleAV: "*.com/*", resources: []string{"widgets"}, expr: "object.data.k == 'v'"},
		{name: "wild-decided", ruleAV: "*", resources: []string{"*"}, expr: "!object.apiVersion.contains('.') || object.data.k == 'v'"},
		{name: "misplaced", ruleAV: "example.com/v1", resources: []string{"*"}, expr: "object.top == 't'"},
		// library functions, shadowed object, whole-value operators
		{name: "map-eq-dyn", expr: "object.spec.y == dyn({'a': 1, 'b': 'two'})"},
		{name: "nested-exists", expr: "object.spec.containers.exists(c, c.ports.exists(p, p.containerPort == 80))"},
		{name: "in-list", expr: "object.spec.str in ['hello'] && object.spec.x in [1, 2]"},
		{name: "flatten", expr: "[object.spec.containers, object.spec.list].flatten().size() == 2"},
		{name: "scalar-has", expr: "has(object.spec.str.x)"},
		{name: "dot-dyn", expr: ".dyn(object).data.k == 'v'"},
		{name: "shadow-iter-object-range", expr: "[object.data].exists(object, object.k == 'v')"},
		{name: "string-of-int", expr: "false", msg: "string(object.spec.x) + object.spec.y.b"},
	} {
		samePrunedVerdict(t, c)
	}
}

// Not pruning: decide.go's readsOnlyAPIVersion takes .object for a type name, so a
// wildcard rule is decided from an object that holds only its apiVersion.
func TestPrunedVerdictsRootScopedDecided(t *testing.T) {
	expr := "!has(.object.data) || false"
	mk := func(av string, res []string) *Evaluator {
		g := ruleSet(extv1alpha1.RuleSpec{APIVersion: av, Resources: res, RuleExpression: expr})
		g[0].Name = "prune"
		ev, err := NewEvaluator(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	exact := mk("example.com/v1", []string{"widgets"}).Evaluate("example.com/v1", "widgets", pruneObject())
	wild := mk("*", []string{"*"}).Evaluate("example.com/v1", "widgets", pruneObject())
	if exact.Outcome != wild.Outcome {
		t.Errorf("BUG decide: %q exact rule %v, same rule as wildcard %v (RulesApplied %d)", expr, exact.Outcome, wild.Outcome, wild.RulesApplied)
	}
}
