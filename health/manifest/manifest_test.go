package manifest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kumodo/convoy-observer/health/manifest"
)

func TestDecodeObjects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		in      string
		want    []string // kind/namespace/name
		wantErr string
	}{
		{name: "multi-document YAML with empty documents", in: `---
# comment only
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec: {replicas: 3}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
`, want: []string{"Deployment/demo/web", "Pod//p"}},
		{name: "JSON stream", in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"},"spec":{"replicas":3}}
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"}}`, want: []string{"Deployment//a", "Pod//b"}},
		{name: "List", in: `apiVersion: v1
kind: List
items:
- {apiVersion: apps/v1, kind: Deployment, metadata: {name: a}, spec: {replicas: 3}}
- {apiVersion: batch/v1, kind: Job, metadata: {name: b}}
`, want: []string{"Deployment//a", "Job//b"}},
		{name: "typed list: items inherit kind and apiVersion", in: `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}`,
			want: []string{"Pod//a", "Pod//b"}},
		{name: "empty list", in: "apiVersion: v1\nkind: List\nitems: []\n", want: nil},
		{name: "empty file", in: "", want: nil},
		{name: "missing kind", in: "apiVersion: v1\nmetadata: {name: a}\n", wantErr: "document 1: object has no kind"},
		{name: "missing apiVersion", in: "kind: Pod\nmetadata: {name: a}\n", wantErr: `document 1: Pod "a" has no apiVersion`},
		{name: "list item without kind", in: "apiVersion: v1\nkind: List\nitems:\n- {metadata: {name: a}}\n",
			wantErr: "document 1: item 0: object has no kind"},
		{name: "bad YAML", in: "kind: Pod\n---\nkind: [\n", wantErr: "document 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs, err := manifest.DecodeObjects(strings.NewReader(tc.in))
			if failed(t, err, tc.wantErr) {
				return
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for _, o := range objs {
				if o.GetKind() == "Deployment" {
					if r, ok := o.Object["spec"].(map[string]any)["replicas"].(int64); !ok || r != 3 {
						t.Errorf("spec.replicas is %T %v, want int64 3", o.Object["spec"].(map[string]any)["replicas"], r)
					}
				}
			}
		})
	}
}

// TestDecodeObjectsNumbers: numbers decode as on live objects.
func TestDecodeObjectsNumbers(t *testing.T) {
	t.Parallel()
	objs, err := manifest.DecodeObjects(strings.NewReader(`apiVersion: v1
kind: ConfigMap
metadata: {name: n, generation: 9007199254740993}
data: {int: 3, neg: -2, float: 1.5, list: [1, 2.5]}
`))
	if err != nil {
		t.Fatal(err)
	}
	data := objs[0].Object["data"].(map[string]any)
	want := map[string]any{"int": int64(3), "neg": int64(-2), "float": 1.5}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("%s: %T %v, want %T %v", k, data[k], data[k], v, v)
		}
	}
	if l := data["list"].([]any); l[0] != int64(1) || l[1] != 2.5 {
		t.Errorf("list %#v", l)
	}
	if g := objs[0].GetGeneration(); g != 9007199254740993 {
		t.Errorf("generation %d lost precision", g)
	}
}

func TestJSONWholeNumbersAreInts(t *testing.T) {
	t.Parallel()
	objs, err := manifest.DecodeObjects(strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","spec":{"a":3.0,"b":1e3,"c":2.5,"d":[4.0]}}`))
	if err != nil {
		t.Fatal(err)
	}
	spec := objs[0].Object["spec"].(map[string]any)
	if spec["a"] != int64(3) || spec["b"] != int64(1000) || spec["c"] != 2.5 || spec["d"].([]any)[0] != int64(4) {
		t.Fatalf("spec = %#v", spec)
	}
}

// TestListsNestedAndBadItems: a List inside a List gives its items; a bad item is named
// by its index.
func TestListsNestedAndBadItems(t *testing.T) {
	t.Parallel()
	objs, err := manifest.DecodeObjects(strings.NewReader(`{"apiVersion":"v1","kind":"List","items":[
		{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"inner"}}]},
		{"apiVersion":"v1","kind":"Pod","metadata":{"name":"outer"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetName() != "inner" || objs[1].GetName() != "outer" {
		t.Fatalf("objects = %v", objs)
	}
	_, err = manifest.DecodeObjects(strings.NewReader(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod"}, 1]}`))
	if err == nil || !strings.Contains(err.Error(), "document 1: item 1:") {
		t.Fatalf("err = %v, want it to name item 1", err)
	}
}

// TestKindEndingInListWithoutItems: an object whose kind merely ends in "List" (say an
// AllowList) is an object, not a List.
func TestKindEndingInListWithoutItems(t *testing.T) {
	t.Parallel()
	objs, err := manifest.DecodeObjects(strings.NewReader(`{"apiVersion":"example.com/v1","kind":"AllowList","metadata":{"name":"a"},"spec":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "AllowList" {
		t.Fatalf("objects = %v", objs)
	}
}

// TestDuplicateKeys: a key written twice is an error naming the document, the path
// and both lines, in YAML and JSON, for rule sets and objects alike (a silently
// different rule otherwise: testdata/rules-engine/duplicate-key).
func TestDuplicateKeys(t *testing.T) {
	t.Parallel()
	ruleSet := func(rule string) string {
		return "apiVersion: extensions.convoy.kumodo.io/v1alpha1\nkind: GlobalHealthRuleSet\nmetadata: {name: pods}\nspec:\n  rules:\n" + rule
	}
	cases := []struct {
		name, in, want string
		objects        bool
	}{
		{name: "two ruleExpression keys", in: ruleSet("  - apiVersion: v1\n    resources: [pods]\n    ruleExpression: \"false\"\n    ruleExpression: \"true\"\n"),
			want: `document 1: duplicate key "ruleExpression" at spec.rules[0].ruleExpression (line 9; first at line 8)`},
		{name: "two rules keys", in: ruleSet("  - {apiVersion: v1, ruleExpression: 'false'}\n  rules: []\n"),
			want: `document 1: duplicate key "rules" at spec.rules (line 7; first at line 5)`},
		{name: "flow mapping, second document", in: "---\n" + ruleSet("  - {apiVersion: v1, ruleExpression: 'a'}\n") + "---\n" +
			ruleSet("  - {apiVersion: v1, ruleExpression: 'a', apiVersion: v2}\n"),
			want: `document 2: duplicate key "apiVersion" at spec.rules[0].apiVersion (line 14; first at line 14)`},
		{name: "JSON rule set", in: `{"apiVersion":"extensions.convoy.kumodo.io/v1alpha1","kind":"GlobalHealthRuleSet","metadata":{"name":"a","name":"b"},"spec":{"rules":[]}}`,
			want: `document 1: duplicate key "name" at metadata.name`},
		{name: "object", objects: true, in: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nstatus:\n  phase: Failed\n  phase: Running\n",
			want: `document 1: duplicate key "phase" at status.phase (line 6; first at line 5)`},
		{name: "object in a JSON stream", objects: true, in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"status":{"phase":"Failed","phase":"Running"}}`,
			want: `document 2: duplicate key "phase" at status.phase`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if tc.objects {
				_, err = manifest.DecodeObjects(strings.NewReader(tc.in))
			} else {
				_, _, err = manifest.DecodeRuleSets(strings.NewReader(tc.in))
			}
			var d *manifest.DuplicateKeyError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &d) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// A merge key and a key repeated in different mappings are fine.
	if _, err := manifest.DecodeObjects(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: x}\nextra: {a: y}\n")); err != nil {
		t.Errorf("same key in two mappings: %v", err)
	}
}

// TestListsNestedTooDeep: Lists nested in Lists deeper than DecodeObjects allows are an
// error in every decoder (rule sets and CRDs too), not a recursion that holds a copy of
// the rest of the document per level: a 150 KB file of 3,000 nested Lists took 350 MB.
func TestListsNestedTooDeep(t *testing.T) {
	t.Parallel()
	nest := func(inner string, depth int) string {
		for range depth {
			inner = `{"apiVersion":"v1","kind":"List","items":[` + inner + `]}`
		}
		return inner
	}
	set := `{"apiVersion":"extensions.convoy.kumodo.io/v1alpha1","kind":"GlobalHealthRuleSet","metadata":{"name":"g"},"spec":{"rules":[]}}`
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"}}`
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`
	decoders := map[string]struct {
		item   string
		decode func(string) error
	}{
		"objects": {cm, func(s string) error { _, err := manifest.DecodeObjects(strings.NewReader(s)); return err }},
		"rule sets": {set, func(s string) error {
			_, _, err := manifest.DecodeRuleSets(strings.NewReader(s))
			return err
		}},
		"CRDs": {crd, func(s string) error { _, err := manifest.DecodeCRDs(strings.NewReader(s)); return err }},
	}
	for name, d := range decoders {
		if err := d.decode(nest(d.item, 3)); err != nil {
			t.Errorf("%s: 3 nested Lists: %v", name, err)
		}
		if err := d.decode(nest(d.item, 20)); err == nil || !strings.Contains(err.Error(), "Lists nested deeper than 8") {
			t.Errorf("%s: 20 nested Lists: %v, want an error", name, err)
		}
	}
}

// TestDuplicateKeysAsTheDecoderSeesThem: duplicates are found by the decoder that
// produces the values, so the check and the meaning agree: a JSON file with a
// surrogate-pair escape is checked too (it was skipped when the YAML pre-parser failed
// on it, and the second value was judged), YAML 1.1's `on` and "true" are one key
// "true" (one value was dropped silently), and "on", `on` and `off` are three keys
// ("on", "true", "false"; they were called duplicates).
func TestDuplicateKeysAsTheDecoderSeesThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"surrogate pair in JSON", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"\ud83d\ude80"},"status":{"phase":"Failed","phase":"Running"}}`,
			`document 1: duplicate key "phase" at status.phase`},
		{"on and true", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  on: x\n  \"true\": y\n",
			`document 1: duplicate key "true" at data.true (line 6; first at line 5)`},
		{"yes and true", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  yes: x\n  true: y\n",
			`document 1: duplicate key "true" at data.true (line 6; first at line 5)`},
		{"quoted and plain", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  \"a\": x\n  a: y\n",
			`document 1: duplicate key "a" at data.a (line 6; first at line 5)`},
		{"int and float", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  1: x\n  1.0: y\n",
			`document 1: duplicate key "1" at data.1 (line 6; first at line 5)`},
	} {
		_, err := manifest.DecodeObjects(strings.NewReader(tc.in))
		var d *manifest.DuplicateKeyError
		if err == nil || !errors.As(err, &d) || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	objs, err := manifest.DecodeObjects(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  \"on\": a\n  on: b\n  off: c\n"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("on, \"on\" and off: %v", err)
	}
	data, _ := objs[0].Object["data"].(map[string]any)
	if data["on"] != "a" || data["true"] != "b" || data["false"] != "c" || len(data) != 3 {
		t.Errorf("data = %v, want on=a true=b false=c", data)
	}
}

// TestListOnlyWhenShapedLikeOne: a document is a list only when it is shaped like one:
// kind List or <X>List, items an array, and nothing but apiVersion, kind, metadata and
// items, with a metadata that is a list's (no name). A custom resource whose kind ends
// in List and that has an items field of its own (an IPAllowList) is the object it is,
// not two nameless IPAllow objects; a PodList of the API server still stands for its Pods.
func TestListOnlyWhenShapedLikeOne(t *testing.T) {
	t.Parallel()
	const allowList = `apiVersion: ex.io/v1
kind: IPAllowList
metadata: {name: x}
items: [{cidr: 10.0.0.0/8}, {cidr: 10.1.0.0/16}]
status: {ready: false}
`
	for _, tc := range []struct {
		name, in string
		want     []string // kind/name
		wantErr  string
	}{
		{name: "custom resource with a name, items and a status", in: allowList, want: []string{"IPAllowList/x"}},
		{name: "custom resource with a name and items only", in: "apiVersion: ex.io/v1\nkind: IPAllowList\nmetadata: {name: x}\nitems: [{cidr: 10.0.0.0/8}]\n",
			want: []string{"IPAllowList/x"}},
		{name: "custom resource with items and a spec, no name", in: "apiVersion: ex.io/v1\nkind: IPAllowList\nitems: []\nspec: {}\n",
			want: []string{"IPAllowList/"}},
		{name: "custom resource whose items is no array", in: "apiVersion: ex.io/v1\nkind: IPAllowList\nmetadata: {name: x}\nitems: {a: b}\n",
			want: []string{"IPAllowList/x"}},
		{name: "a list of the API server", in: `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"12","continue":""},` +
			`"items":[{"metadata":{"name":"a"}},{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"}}]}`, want: []string{"Pod/a", "Pod/b"}},
		{name: "a typed list of custom resources", in: "apiVersion: ex.io/v1\nkind: IPAllowList\nmetadata: {}\nitems:\n- {metadata: {name: a}, spec: {}}\n",
			want: []string{"IPAllow/a"}},
		{name: "kind List is always a list", in: "apiVersion: v1\nkind: List\nmetadata: {name: odd}\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n",
			want: []string{"Pod/a"}},
		{name: "kind List whose items is no array", in: "apiVersion: v1\nkind: List\nitems: {a: b}\n", wantErr: "document 1: List: items must be an array of objects"},
		{name: "kind List without items", in: "apiVersion: v1\nkind: List\nmetadata: {}\n", wantErr: "document 1: List: items must be an array of objects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs, err := manifest.DecodeObjects(strings.NewReader(tc.in))
			if failed(t, err, tc.wantErr) {
				return
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// The object keeps its own items.
	objs, err := manifest.DecodeObjects(strings.NewReader(allowList))
	if err != nil || len(objs) != 1 {
		t.Fatalf("%v %v", objs, err)
	}
	if items, _ := objs[0].Object["items"].([]any); len(items) != 2 {
		t.Errorf("items = %v, want the two CIDRs", objs[0].Object["items"])
	}

	// Rule sets and CRDs read lists the same way: a named <X>List is a document of an
	// unknown kind, not a list whose items are read.
	named := "apiVersion: extensions.convoy.kumodo.io/v1alpha1\nkind: HealthRuleSetList\nmetadata: {name: x}\nitems:\n- metadata: {name: y, namespace: ns}\n  spec: {rules: []}\n"
	if _, _, err := manifest.DecodeRuleSets(strings.NewReader(named)); err == nil || !strings.Contains(err.Error(), `unknown kind "HealthRuleSetList"`) {
		t.Errorf("rule sets: %v, want an unknown kind", err)
	}
	crds := "apiVersion: ex.io/v1\nkind: WidgetList\nmetadata: {name: x}\nitems:\n- {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: a}}\n"
	if _, err := manifest.DecodeCRDs(strings.NewReader(crds)); err == nil || !strings.Contains(err.Error(), `WidgetList "x"`) {
		t.Errorf("CRDs: %v, want WidgetList to be no CustomResourceDefinition", err)
	}
}

// failed checks a decoder's error: one containing wantErr when wantErr is not "" (and
// then reports true, nothing more to check), none otherwise.
func failed(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
