package health

import (
	"bytes"
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

// MarshalKept returns the JSON of what f keeps of the Go object that v points to (an
// API type's struct): the content that Prune keeps of the object's own JSON, without
// building the maps of that JSON. It walks the object by the fields' JSON names (an
// embedded or ",inline" struct's fields are its parent's; "omitempty" and "omitzero"
// leave out what encoding/json leaves out) down to f's leaves, whose values encoding/json
// encodes whole, as it does a value that is neither struct, map, list nor pointer. A
// value that encodes itself (a json.Marshaler: times, quantities, raw extensions) is
// encoded, and what it encodes is pruned. A nil f encodes the whole object. The error is
// encoding/json's.
func (f *Fields) MarshalKept(v any) ([]byte, error) {
	if f == nil || f.all {
		return json.Marshal(v)
	}
	kept, err := f.kept(reflect.ValueOf(v))
	if err != nil {
		return nil, err
	}
	return json.Marshal(kept)
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// kept returns a value that encodes as what f keeps of v.
func (f *Fields) kept(v reflect.Value) (any, error) {
	if !v.IsValid() {
		return nil, nil
	}
	if f == nil || f.all {
		return whole(v)
	}
	if v.Type().Implements(jsonMarshaler) || (v.CanAddr() && v.Addr().Type().Implements(jsonMarshaler)) {
		raw, err := whole(v)
		if err != nil || len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
			return raw, err
		}
		var content any // an object or a list: pruned as its JSON is
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&content); err != nil {
			return nil, err
		}
		f.pruneValue(content)
		return content, nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return f.kept(v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil, nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return whole(v) // bytes encode as a string
		}
		items := make([]any, v.Len())
		for i := range items {
			item, err := f.kept(v.Index(i))
			if err != nil {
				return nil, err
			}
			items[i] = item
		}
		return items, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return whole(v)
		}
		out := make(map[string]any, len(f.sub))
		for name, child := range f.sub {
			mv := v.MapIndex(reflect.ValueOf(name).Convert(v.Type().Key()))
			if !mv.IsValid() {
				continue
			}
			value, err := child.kept(mv)
			if err != nil {
				return nil, err
			}
			out[name] = value
		}
		return out, nil
	case reflect.Struct:
		out := make(map[string]any, len(f.sub))
		if err := f.keptFields(v, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	return whole(v)
}

// keptFields adds to out what f keeps of the fields of the struct v, by their JSON names.
func (f *Fields) keptFields(v reflect.Value, out map[string]any) error {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() && !sf.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		options := strings.Split(opts, ",")
		fv := v.Field(i)
		switch {
		case name == "-" && opts == "":
			continue
		case (sf.Anonymous && name == "") || slices.Contains(options, "inline"):
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				if err := f.keptFields(fv, out); err != nil {
					return err
				}
			}
			continue
		case name == "":
			name = sf.Name
		}
		child := f.sub[name]
		if child == nil || (slices.Contains(options, "omitempty") && emptyValue(fv)) || (slices.Contains(options, "omitzero") && zeroValue(fv)) {
			continue
		}
		value, err := child.kept(fv)
		if err != nil {
			return err
		}
		out[name] = value
	}
	return nil
}

// whole is encoding/json's encoding of v (through its address when it has one, so that
// a MarshalJSON of a pointer receiver is used as encoding/json uses it for a field).
func whole(v reflect.Value) (json.RawMessage, error) {
	if v.CanAddr() {
		return json.Marshal(v.Addr().Interface())
	}
	return json.Marshal(v.Interface())
}

// emptyValue is what "omitempty" leaves out: false, 0, "", a nil pointer or interface,
// and an array, map, slice or string of length 0.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// zeroValue is what "omitzero" leaves out: a value whose IsZero method says so, else
// the zero value of its type.
func zeroValue(v reflect.Value) bool {
	if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return true
		}
		return z.IsZero()
	}
	return v.IsZero()
}
