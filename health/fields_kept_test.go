package health

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// compareKept fails t when MarshalKept of v differs from Prune of v's JSON, or panics,
// and reports whether they matched.
func compareKept(t *testing.T, name string, f *Fields, v any) (same bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: PANIC in MarshalKept (fields %s): %v", name, f, r)
			same = false
		}
	}()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Errorf("%s: json.Marshal: %v", name, err)
		return false
	}
	decode := func(b []byte) map[string]any {
		var m map[string]any
		if err := utiljson.Unmarshal(b, &m); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		return m
	}
	want := decode(raw)
	f.Prune(want)
	kept, err := f.MarshalKept(v)
	if err != nil {
		t.Errorf("%s: MarshalKept: %v", name, err)
		return false
	}
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(decode(kept))
	if string(w) != string(g) {
		t.Errorf("%s (fields %s):\n  full JSON:   %s\n  Prune(JSON): %s\n  MarshalKept: %s", name, f, raw, w, g)
		return false
	}
	return true
}

type inX struct {
	X string `json:"x"`
}

// shadowing returns a new struct of an outer field X (tag outerTag, value outer, none
// when outerTag is "") and the embedded structs InX and InX2 (each with value in, when
// not ""), each field X tagged "x": names that clash, built at run time (go vet rejects
// such tags in source).
func shadowing(outerTag, outer, in, in2 string) any {
	inner := func(name, value string) (reflect.StructField, reflect.Value) {
		typ := reflect.StructOf([]reflect.StructField{{Name: "X", Type: reflect.TypeFor[string](), Tag: `json:"x"`}})
		v := reflect.New(typ).Elem()
		v.Field(0).SetString(value)
		return reflect.StructField{Name: name, Type: typ, Anonymous: true}, v
	}
	var fields []reflect.StructField
	var values []reflect.Value
	if outerTag != "" {
		fields = append(fields, reflect.StructField{Name: "X", Type: reflect.TypeFor[string](), Tag: reflect.StructTag(`json:"` + outerTag + `"`)})
		values = append(values, reflect.ValueOf(outer))
	}
	for _, e := range []struct{ name, value string }{{"InX", in}, {"InX2", in2}} {
		if e.value != "" {
			f, v := inner(e.name, e.value)
			fields, values = append(fields, f), append(values, v)
		}
	}
	v := reflect.New(reflect.StructOf(fields))
	for i := range values {
		v.Elem().Field(i).Set(values[i])
	}
	return v.Interface()
}

type untaggedX struct{ X string }
type taggedX struct {
	Y string `json:"X"`
}
type taggedWins struct {
	taggedX
	untaggedX
}
type Name string
type embedsNonStruct struct {
	Name
	Other string `json:"other"`
}
type embedsPtrNonStruct struct{ *Name }
type embedsIface struct{ fmt.Stringer }
type namedInline struct {
	Spec inX `json:",inline"`
}
type withString struct {
	N int64 `json:"n,string"`
	B bool  `json:"b,string"`
}
type dashComma struct {
	D string `json:"-,"` //nolint:staticcheck // the name "-", as encoding/json reads it: what the test checks
}
type hiddenEmbed struct {
	inX
}
type negZero struct {
	F float64 `json:"f,omitempty"`
}
type ptrZeroer struct{ A, B int }

func (p *ptrZeroer) IsZero() bool { return p.A == 0 }

type withPtrZeroer struct {
	P ptrZeroer `json:"p,omitzero"`
}
type withTimeOmitzero struct {
	T metav1.Time `json:"t,omitzero"`
}
type withAnyOmitzero struct {
	V any `json:"v,omitzero"`
}
type intMap struct {
	M map[int]string `json:"m"`
}
type textM struct{ A, B int }

func (t textM) MarshalText() ([]byte, error) { return []byte(fmt.Sprintf("%d-%d", t.A, t.B)), nil }

type withText struct {
	T textM `json:"t"`
}
type badTag struct {
	A string `json:"a\"b"` //nolint:staticcheck // a tag name encoding/json does not accept: what the test checks
}

// TestMarshalKeptOfUnusualShapes: Go shapes that the API types do not have, whose JSON
// names encoding/json resolves by its own rules (clashing names, embedded values that
// are no struct, ",string", "-,", tags it does not accept, omitzero by a method of a
// pointer or of the held value, keys that are no strings, text marshalers), encode as
// Prune of their JSON keeps; a cycle is encoding/json's error, not a crash.
func TestMarshalKeptOfUnusualShapes(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	var nilTime *time.Time
	n := Name("n")
	cases := []struct {
		name string
		f    *Fields
		v    any
	}{
		{"outer field before embedded (shadowing)", fieldsOfPaths("x"), shadowing("x", "outer", "inner", "")},
		{"outer omitempty empty shadows embedded", fieldsOfPaths("x"), shadowing("x,omitempty", "", "inner", "")},
		{"ambiguous same depth", fieldsOfPaths("x"), shadowing("", "", "a", "b")},
		{"tagged beats untagged at same depth", fieldsOfPaths("X"), &taggedWins{taggedX{"tagged"}, untaggedX{"untagged"}}},
		{"embedded exported non-struct", fieldsOfPaths("Name", "other"), &embedsNonStruct{Name: "n", Other: "o"}},
		{"embedded pointer to non-struct", fieldsOfPaths("Name"), &embedsPtrNonStruct{&n}},
		{"embedded interface", fieldsOfPaths("Stringer"), &embedsIface{time.Second}},
		{"named field with ,inline", fieldsOfPaths("Spec", "x"), &namedInline{Spec: inX{"s"}}},
		{",string option", fieldsOfPaths("n", "b"), &withString{N: 5, B: true}},
		{"json:\"-,\"", fieldsOfPaths("-"), &dashComma{D: "dash"}},
		{"unexported embedded struct leaf", fieldsOfPaths("x"), &hiddenEmbed{inX{"h"}}},
		{"omitempty -0.0", fieldsOfPaths("f"), &negZero{F: negz()}},
		{"omitzero pointer-receiver IsZero", fieldsOfPaths("p"), &withPtrZeroer{P: ptrZeroer{A: 0, B: 1}}},
		{"omitzero metav1.Time zero instant w/ location", fieldsOfPaths("t"), &withTimeOmitzero{T: metav1.Time{Time: time.Time{}.In(loc)}}},
		{"omitzero any holding time.Time{}", fieldsOfPaths("v"), &withAnyOmitzero{V: time.Time{}}},
		{"omitzero any holding nil *time.Time", fieldsOfPaths("v"), &withAnyOmitzero{V: nilTime}},
		{"map[int]string", fieldsOfPaths("m.1"), &intMap{M: map[int]string{1: "a", 2: "b"}}},
		{"TextMarshaler struct, fields name children", fieldsOfPaths("t.A"), &withText{T: textM{1, 2}}},
		{"invalid tag name", fieldsOfPaths("A"), &badTag{A: "v"}},
	}
	for _, c := range cases {
		compareKept(t, c.name, c.f, c.v)
	}
	var cycle any
	cycle = &cycle
	if _, err := fieldsOfPaths("v.a").MarshalKept(&holder{V: cycle}); err == nil {
		t.Error("a cycle encoded without an error")
	}
	// A creationTimestamp of the zero second, as protobuf decodes it (a zero instant in
	// the local zone): omitzero by metav1.Time's IsZero, a method of its pointer.
	src := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", CreationTimestamp: metav1.NewTime(time.Time{}.Add(500 * time.Millisecond))}}
	pb, err := src.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := d.Unmarshal(pb); err != nil {
		t.Fatal(err)
	}
	compareKept(t, "creationTimestamp of the zero second, from protobuf", fieldsOfPaths("metadata.creationTimestamp", "metadata.name"), d)
}

type holder struct {
	V any `json:"v"`
}

func negz() float64 { z := 0.0; return -z }
