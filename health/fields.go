package health

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

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
// embedded struct without a name is its parent's fields; "omitempty" and "omitzero"
// leave out what encoding/json leaves out) down to f's leaves, whose values encoding/json
// encodes whole, as it does a value that is neither struct, map, list nor pointer. A
// value that encodes itself (a json.Marshaler or encoding.TextMarshaler: times,
// quantities, raw extensions) is encoded, and what it encodes is pruned. So is a struct
// whose JSON names encoding/json resolves by its rules for clashing or unusual fields
// (two fields of one name, a ",string" option, an embedded value that is no struct, a
// name that is no plain identifier), and a map whose keys are not strings: the API types
// have none, and this walk does not reproduce those rules. A nil f encodes the whole
// object. The error is encoding/json's (a cycle, an unsupported value).
func (f *Fields) MarshalKept(v any) ([]byte, error) {
	if f == nil || f.all {
		return json.Marshal(v)
	}
	w := keptWriters.Get().(*keptWriter)
	defer func() {
		if w.buf.Cap() <= maxPooledKept { // a large object's buffer is not kept
			keptWriters.Put(w)
		}
	}()
	w.buf.Reset()
	if err := f.writeKept(w, reflect.ValueOf(v), 0); err != nil {
		return nil, err
	}
	return bytes.Clone(w.buf.Bytes()), nil
}

// maxKeptDepth bounds the walk of writeKept: deeper values are encoded by encoding/json,
// which tells a cycle from a deep value.
const maxKeptDepth = 200

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	zeroer        = reflect.TypeFor[interface{ IsZero() bool }]()
)

// keptWriter is the buffer that MarshalKept writes into, and an encoding/json encoder
// of values into it; keptWriters reuses them, so one object costs the copy of its JSON
// and the values that encoding/json encodes, not a tree of maps.
type keptWriter struct {
	buf bytes.Buffer
	enc *json.Encoder
	// fields is the scratch list of a struct's kept fields, reused down the walk.
	fields []keptField
}

// maxPooledKept bounds the buffer that keptWriters keeps between objects, in bytes.
const maxPooledKept = 64 << 10

var keptWriters = sync.Pool{New: func() any {
	w := &keptWriter{}
	w.enc = json.NewEncoder(&w.buf)
	return w
}}

// keptField is a field of a struct that f keeps: its JSON name, its fields, its value.
type keptField struct {
	name  string
	f     *Fields
	value reflect.Value
}

// value writes encoding/json's encoding of x (without the encoder's newline).
func (w *keptWriter) value(x any) error {
	if err := w.enc.Encode(x); err != nil {
		return err
	}
	w.buf.Truncate(w.buf.Len() - 1)
	return nil
}

// name writes the object key name, as encoding/json writes a map's string key.
func (w *keptWriter) name(name string) error {
	for i := range len(name) {
		if c := name[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return w.value(name)
		}
	}
	w.buf.WriteByte('"')
	w.buf.WriteString(name)
	w.buf.WriteByte('"')
	return nil
}

// writeKept writes what f keeps of v, at depth levels of the walk, as encoding/json
// would write the tree of maps and lists of those values: object keys sorted, nil
// pointers, interfaces, slices and maps as null, leaves encoded whole.
func (f *Fields) writeKept(w *keptWriter, v reflect.Value, depth int) error {
	if !v.IsValid() {
		w.buf.WriteString("null")
		return nil
	}
	if f == nil || f.all {
		return w.whole(v)
	}
	t := v.Type()
	value, pointer := selfEncoding(t)
	if depth > maxKeptDepth || value || (pointer && v.CanAddr()) {
		return f.writePruned(w, v)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			w.buf.WriteString("null")
			return nil
		}
		return f.writeKept(w, v.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			w.buf.WriteString("null")
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return w.whole(v) // bytes encode as a string
		}
		w.buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			if err := f.writeKept(w, v.Index(i), depth+1); err != nil {
				return err
			}
		}
		w.buf.WriteByte(']')
		return nil
	case reflect.Map:
		if v.IsNil() {
			w.buf.WriteString("null")
			return nil
		}
		if keyValue, _ := selfEncoding(t.Key()); t.Key().Kind() != reflect.String || keyValue {
			return f.writePruned(w, v)
		}
		start := len(w.fields)
		for name, child := range f.sub {
			if mv := v.MapIndex(reflect.ValueOf(name).Convert(t.Key())); mv.IsValid() {
				w.fields = append(w.fields, keptField{name: name, f: child, value: mv})
			}
		}
		return w.object(start, depth)
	case reflect.Struct:
		if !plainStruct(t) {
			return f.writePruned(w, v)
		}
		start := len(w.fields)
		f.keptFields(w, v)
		return w.object(start, depth)
	}
	return w.whole(v)
}

// object writes the kept fields from start on as a JSON object, keys sorted as
// encoding/json sorts a map's, and drops them from the scratch list.
func (w *keptWriter) object(start, depth int) error {
	defer func() {
		clear(w.fields[start:]) // no object outlives the walk in the pool
		w.fields = w.fields[:start]
	}()
	fields := w.fields[start:]
	slices.SortFunc(fields, func(a, b keptField) int { return strings.Compare(a.name, b.name) })
	w.buf.WriteByte('{')
	for i := range fields {
		kf := w.fields[start+i] // the list may grow (and move) below this object
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if err := w.name(kf.name); err != nil {
			return err
		}
		w.buf.WriteByte(':')
		if err := kf.f.writeKept(w, kf.value, depth+1); err != nil {
			return err
		}
	}
	w.buf.WriteByte('}')
	return nil
}

// whole writes encoding/json's encoding of v (through its address when it has one, so
// that a MarshalJSON of a pointer receiver is used as encoding/json uses it for a
// field); a bool or an integer of a type without methods directly, as encoding/json
// writes it.
func (w *keptWriter) whole(v reflect.Value) error {
	if v.Type().PkgPath() != "" { // a named type, which may encode itself
		return w.valueOf(v)
	}
	switch v.Kind() {
	case reflect.Bool:
		w.buf.WriteString(strconv.FormatBool(v.Bool()))
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), v.Int(), 10))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		w.buf.Write(strconv.AppendUint(w.buf.AvailableBuffer(), v.Uint(), 10))
		return nil
	}
	return w.valueOf(v)
}

// valueOf writes encoding/json's encoding of v, through its address when it has one.
func (w *keptWriter) valueOf(v reflect.Value) error {
	if v.CanAddr() {
		return w.value(v.Addr().Interface())
	}
	return w.value(v.Interface())
}

// writePruned writes v encoded by encoding/json, then what Prune keeps of it (numbers as
// they were written).
func (f *Fields) writePruned(w *keptWriter, v reflect.Value) error {
	raw, err := whole(v)
	if err != nil {
		return err
	}
	if len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
		w.buf.Write(raw)
		return nil
	}
	var content any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&content); err != nil {
		return err
	}
	f.pruneValue(content)
	return w.value(content)
}

// encodesItself reports whether encoding/json encodes a value of t by its own method.
func encodesItself(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || t.Implements(textMarshaler)
}

// selfEncoders caches selfEncoding by type.
var selfEncoders sync.Map // reflect.Type → [2]bool

// selfEncoding reports whether encoding/json encodes a value of t (value), or one of t
// that it can address (pointer), by its own method: encodesItself of t and of *t.
func selfEncoding(t reflect.Type) (value, pointer bool) {
	if c, ok := selfEncoders.Load(t); ok {
		both := c.([2]bool)
		return both[0], both[1]
	}
	value, pointer = encodesItself(t), encodesItself(reflect.PointerTo(t))
	selfEncoders.Store(t, [2]bool{value, pointer})
	return value, pointer
}

// keptFields appends to w's scratch list the fields of the struct v (a plainStruct)
// that f keeps, by their JSON names; "omitempty" and "omitzero" leave out what
// encoding/json leaves out.
func (f *Fields) keptFields(w *keptWriter, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		switch {
		case tag == "-":
			continue
		case sf.Anonymous && name == "":
			// An embedded struct, or a pointer to one (plainStruct): its fields are this
			// struct's.
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			f.keptFields(w, fv)
			continue
		case !sf.IsExported():
			continue
		case name == "":
			name = sf.Name
		}
		child := f.sub[name]
		if child == nil {
			continue
		}
		if (hasOption(opts, "omitempty") && emptyValue(fv)) || (hasOption(opts, "omitzero") && zeroValue(fv)) {
			continue
		}
		w.fields = append(w.fields, keptField{name: name, f: child, value: fv})
	}
}

// hasOption reports whether the options of a json tag (after its name) include opt.
func hasOption(opts, opt string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == opt {
			return true
		}
	}
	return false
}

// plainStructs caches plainStruct by type.
var plainStructs sync.Map // reflect.Type → bool

// plainStruct reports whether keptFields encodes the struct type t as encoding/json
// does: no field has the ",string" option or a name that is not a plain identifier,
// every embedded field without a name is a struct or a pointer to one, and no two
// fields (those of embedded structs included) have the same JSON name.
func plainStruct(t reflect.Type) bool {
	if plain, ok := plainStructs.Load(t); ok {
		return plain.(bool)
	}
	names := map[string]bool{}
	plain := collectNames(t, names, 0)
	plainStructs.Store(t, plain)
	return plain
}

func collectNames(t reflect.Type, names map[string]bool, depth int) bool {
	if depth > 8 {
		return false
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "string") {
			return false
		}
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() != reflect.Struct || !collectNames(et, names, depth+1) {
				return false
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if !plainName(name) || names[name] {
			return false
		}
		names[name] = true
	}
	return true
}

// plainName reports whether name is made of letters, digits, '_', '-', '.', '/' and '$'
// only (encoding/json accepts more, and ignores a tag's name it does not accept).
func plainName(name string) bool {
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-./$", r) {
			return false
		}
	}
	return name != ""
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

// zeroValue is what "omitzero" leaves out, by encoding/json's rules for the field's
// type: its IsZero method (of the value, or of a pointer to it), else the zero value.
func zeroValue(v reflect.Value) bool {
	t := v.Type()
	switch {
	case (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface) && t.Implements(zeroer):
		return v.IsNil() || (t.Kind() == reflect.Interface && v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil()) ||
			v.Interface().(interface{ IsZero() bool }).IsZero()
	case t.Implements(zeroer):
		return v.Interface().(interface{ IsZero() bool }).IsZero()
	case reflect.PointerTo(t).Implements(zeroer):
		if !v.CanAddr() {
			boxed := reflect.New(t).Elem()
			boxed.Set(v)
			v = boxed
		}
		return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
	}
	return v.IsZero()
}
