package health

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
)

// Fields is a set of an object's fields: a tree of field names in which a name without
// children keeps its whole value. A nil *Fields is every field. The observer's caches
// keep of a target object only the Fields that the rules read and the loop needs
// (docs/design.md, "What the cache keeps"); Prune drops the rest.
type Fields struct {
	// all keeps the whole value at this node (a leaf).
	all bool
	sub map[string]*Fields
}

// add keeps the value at path (the whole value for an empty path).
func (f *Fields) add(path []string) {
	for _, name := range path {
		if f.all {
			return
		}
		if f.sub == nil {
			f.sub = map[string]*Fields{}
		}
		next := f.sub[name]
		if next == nil {
			next = &Fields{}
			f.sub[name] = next
		}
		f = next
	}
	f.all, f.sub = true, nil
}

// merge adds every field of g to f.
func (f *Fields) merge(g *Fields) {
	if f.all {
		return
	}
	if g.all {
		f.all, f.sub = true, nil
		return
	}
	for name, child := range g.sub {
		if f.sub == nil {
			f.sub = map[string]*Fields{}
		}
		if f.sub[name] == nil {
			f.sub[name] = &Fields{}
		}
		f.sub[name].merge(child)
	}
}

// Covers reports whether f keeps every field that g keeps (a nil Fields is every field).
func (f *Fields) Covers(g *Fields) bool {
	switch {
	case f == nil || f.all:
		return true
	case g == nil || g.all:
		return false
	}
	for name, child := range g.sub {
		mine := f.sub[name]
		if mine == nil || !mine.Covers(child) {
			return false
		}
	}
	return true
}

// Equal reports whether f and g keep the same fields.
func (f *Fields) Equal(g *Fields) bool { return f.Covers(g) && g.Covers(f) }

// Prune removes from obj, in place, every field that f does not keep: under a map of f's
// tree only the names f lists stay; a list's items are pruned alike by the same node
// (a rule that selects a field of list items through a comprehension keeps the whole
// list, see FieldsOf). A nil f or a leaf keeps everything.
func (f *Fields) Prune(obj map[string]any) {
	if f == nil || f.all {
		return
	}
	for name, v := range obj {
		child := f.sub[name]
		if child == nil {
			delete(obj, name)
			continue
		}
		child.pruneValue(v)
	}
}

func (f *Fields) pruneValue(v any) {
	switch t := v.(type) {
	case map[string]any:
		f.Prune(t)
	case []any:
		for _, item := range t {
			f.pruneValue(item)
		}
	}
}

// String lists the kept paths, sorted, comma-separated ("*" for every field).
func (f *Fields) String() string {
	if f == nil || f.all {
		return "*"
	}
	var paths []string
	var walk func(prefix string, g *Fields)
	walk = func(prefix string, g *Fields) {
		if g.all || len(g.sub) == 0 {
			paths = append(paths, prefix)
			return
		}
		for name, child := range g.sub {
			walk(prefix+"."+name, child)
		}
	}
	walk("", f)
	for i := range paths {
		paths[i] = strings.TrimPrefix(paths[i], ".")
	}
	slices.Sort(paths)
	return strings.Join(paths, ",")
}

// alwaysKept are the fields of every target object that the observer reads besides the
// rules: the whole metadata (ownership, deletion, generation, revision annotations) and
// status (hooks, the diagnosis), and of spec what the diagnosis reads (the Pod
// selector, a paused Deployment, a suspended Job) and the desired replicas.
var alwaysKept = [][]string{
	{"apiVersion"}, {"kind"}, {"metadata"}, {"status"},
	{"spec", "selector"}, {"spec", "paused"}, {"spec", "suspend"}, {"spec", "replicas"},
}

// RuleFields is what the rules of a set of rule sets read, by what they match: the
// answer of RuleFields.For. Build it with FieldsOf; it never changes.
type RuleFields struct {
	exact    map[matchKey]*Fields
	wildcard []wildcardFields
	// memo holds the answers of For (matchKey → *Fields), at most maxResolved.
	memo  sync.Map
	nMemo atomic.Int64
}

type wildcardFields struct {
	apiVersion  APIVersionPattern
	anyResource bool
	resources   []string
	fields      *Fields
}

// FieldsOf returns the fields of the objects that the rules of every given rule set
// read (all three expressions of every rule), by the apiVersion and resources the rules
// match. An expression reads a field when it selects it from object by a chain of
// constant field names (object.status.x, object.?spec.?y, object.metadata.labels['a'],
// has(object.spec.z), dyn(object).spec.w): the whole value at the end of the chain is kept, whatever the
// expression does with it. object used any other way (passed whole, indexed with a
// computed key, iterated at its top), and an expression that does not parse, keeps
// every field of what its rule matches. Rules are not type-checked here: it is linear
// in the length of the expressions.
func FieldsOf(global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet) *RuleFields {
	env, err := newEnv()
	rf := &RuleFields{exact: map[matchKey]*Fields{}}
	read := func(rules []extv1alpha1.RuleSpec) {
		for i := range rules {
			spec := &rules[i]
			f := &Fields{}
			for _, expr := range []string{spec.RuleExpression, spec.MessageExpression, spec.FailedExpression} {
				if expr == "" || f.all {
					continue
				}
				if err != nil {
					f.add(nil)
					continue
				}
				parsed, iss := env.compile.Parse(expr)
				if iss.Err() != nil {
					f.add(nil)
					continue
				}
				readsOf(parsed.NativeRep().Expr(), f)
			}
			pattern, _ := ParseAPIVersionPattern(spec.APIVersion)
			if pattern.IsWildcard() || slices.Contains(spec.Resources, Wildcard) {
				w := wildcardFields{apiVersion: pattern, fields: f}
				for _, r := range spec.Resources {
					w.anyResource = w.anyResource || r == Wildcard
					w.resources = append(w.resources, r)
				}
				rf.wildcard = append(rf.wildcard, w)
				continue
			}
			for _, r := range spec.Resources {
				key := matchKey{apiVersion: spec.APIVersion, resource: r}
				if rf.exact[key] == nil {
					rf.exact[key] = &Fields{}
				}
				rf.exact[key].merge(f)
			}
		}
	}
	for i := range global {
		read(global[i].Spec.Rules)
	}
	for i := range local {
		read(local[i].Spec.Rules)
	}
	return rf
}

// Merge returns what the rules of rf and of other read together (a nil one reads every
// field, and so does the result).
func (rf *RuleFields) Merge(other *RuleFields) *RuleFields {
	if rf == nil || other == nil {
		return nil
	}
	out := &RuleFields{exact: map[matchKey]*Fields{}}
	for _, src := range []*RuleFields{rf, other} {
		for key, f := range src.exact {
			if out.exact[key] == nil {
				out.exact[key] = &Fields{}
			}
			out.exact[key].merge(f)
		}
		out.wildcard = append(out.wildcard, src.wildcard...)
	}
	return out
}

// For returns the fields to keep of an object of resource in apiVersion ("apps/v1",
// "deployments"): what the rules that match it read, and what the observer always reads
// (alwaysKept). A nil RuleFields keeps every field. The answer is shared: do not
// modify it.
func (rf *RuleFields) For(apiVersion, resource string) *Fields {
	if rf == nil {
		return nil
	}
	key := matchKey{apiVersion: apiVersion, resource: resource}
	if f, ok := rf.memo.Load(key); ok {
		return f.(*Fields)
	}
	f := rf.fieldsFor(key)
	if rf.nMemo.Load() < maxResolved {
		if _, loaded := rf.memo.LoadOrStore(key, f); !loaded {
			rf.nMemo.Add(1)
		}
	}
	return f
}

func (rf *RuleFields) fieldsFor(key matchKey) *Fields {
	apiVersion, resource := key.apiVersion, key.resource
	f := &Fields{}
	for _, p := range alwaysKept {
		f.add(p)
	}
	if g := rf.exact[matchKey{apiVersion: apiVersion, resource: resource}]; g != nil {
		f.merge(g)
	}
	for _, w := range rf.wildcard {
		if w.apiVersion.Matches(apiVersion) && (w.anyResource || slices.Contains(w.resources, resource)) {
			f.merge(w.fields)
		}
	}
	if f.all {
		return nil
	}
	return f
}

// readsOf adds to f the fields of object that e reads (see FieldsOf).
func readsOf(e celast.Expr, f *Fields) {
	if f.all {
		return
	}
	if path, ok := objectPath(e); ok {
		f.add(path)
		return
	}
	switch e.Kind() {
	case celast.IdentKind:
		// object itself, not under a chain of constant names (a chain is caught above).
		if isObjectIdent(e) {
			f.add(nil)
		}
	case celast.SelectKind:
		readsOf(e.AsSelect().Operand(), f)
	case celast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			readsOf(c.Target(), f)
		}
		for _, a := range c.Args() {
			readsOf(a, f)
		}
	case celast.ListKind:
		for _, el := range e.AsList().Elements() {
			readsOf(el, f)
		}
	case celast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			readsOf(me.Key(), f)
			readsOf(me.Value(), f)
		}
	case celast.StructKind:
		for _, field := range e.AsStruct().Fields() {
			readsOf(field.AsStructField().Value(), f)
		}
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		for _, part := range []celast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()} {
			readsOf(part, f)
		}
	}
}

// objectPath returns the field names of e when e is a chain of constant field
// selections from object: object.a, object.?a, object['a'], object[?'a'], has(object.a),
// dyn(object).a, and their chains. A chain of no names (object alone) is not one.
func objectPath(e celast.Expr) ([]string, bool) {
	var rev []string
	for {
		switch e.Kind() {
		case celast.SelectKind:
			s := e.AsSelect()
			rev = append(rev, s.FieldName())
			e = s.Operand()
			continue
		case celast.CallKind:
			c := e.AsCall()
			if strings.TrimPrefix(c.FunctionName(), ".") == "dyn" && !c.IsMemberFunction() && len(c.Args()) == 1 {
				e = c.Args()[0] // dyn(x) is x, typed dyn
				continue
			}
			if (c.FunctionName() == operators.Index || c.FunctionName() == operators.OptIndex ||
				c.FunctionName() == operators.OptSelect) && len(c.Args()) == 2 {
				if key, ok := constantString(c.Args()[1]); ok {
					rev = append(rev, key)
					e = c.Args()[0]
					continue
				}
			}
		case celast.IdentKind:
			if isObjectIdent(e) && len(rev) > 0 {
				slices.Reverse(rev)
				return rev, true
			}
		}
		return nil, false
	}
}

// isObjectIdent reports whether the identifier e is the object variable, written object
// or, in the root scope, .object (the parser keeps the dot; only the type-checker, which
// FieldsOf does not run, removes it).
func isObjectIdent(e celast.Expr) bool {
	return strings.TrimPrefix(e.AsIdent(), ".") == objectVariable
}

// constantString returns the value of e when it is a string literal.
func constantString(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// PruneStruct zeroes, in place, every field of the Go object that ptr points to that f
// does not keep, by the fields' JSON names (an embedded or ",inline" struct's fields are
// its parent's), so that converting it to unstructured content costs only what is kept.
// A value that encodes itself (a json.Marshaler: times, quantities, int-or-strings) is a
// leaf, and so is a map, whose keys Prune drops afterwards: PruneStruct then Prune of the
// converted content keeps what Prune of the object's JSON decoded keeps. A nil f or a
// leaf keeps everything.
func (f *Fields) PruneStruct(ptr any) { f.pruneStruct(reflect.ValueOf(ptr)) }

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

func (f *Fields) pruneStruct(v reflect.Value) {
	if f == nil || f.all || !v.IsValid() {
		return
	}
	if v.Type().Implements(jsonMarshaler) || (v.CanAddr() && v.Addr().Type().Implements(jsonMarshaler)) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			f.pruneStruct(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			f.pruneStruct(v.Index(i))
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
			fv := v.Field(i)
			switch {
			case name == "-" && opts == "":
				continue
			case (sf.Anonymous && name == "") || slices.Contains(strings.Split(opts, ","), "inline"):
				f.pruneStruct(fv)
				continue
			case name == "":
				name = sf.Name
			}
			if child := f.sub[name]; child != nil {
				child.pruneStruct(fv)
			} else if fv.CanSet() {
				fv.SetZero()
			}
		}
	}
}
