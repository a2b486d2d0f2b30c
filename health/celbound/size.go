package celbound

import (
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// elementUnits is what one list element or map entry counts in sizeOf: as much as
// traversalFactor bytes of a string, a whole cost unit, since visiting an element costs
// about as much as the API server's cost model prices one unit.
const elementUnits = traversalFactor

// sizeOf returns the size of v that the call guard charges for, in tenths of a cost unit:
// the length in bytes of a string or bytes value, 1 for any other scalar, and for a list
// or map elementUnits per element or entry plus the sizes of the elements, keys and
// values, all the way down. It stops
// counting once the size exceeds limit and then returns a number above limit, so the
// walk itself never does more work than the budget it checks.
func sizeOf(v ref.Val, limit uint64) uint64 {
	switch t := v.(type) {
	case types.String:
		return uint64(len(t))
	case types.Bytes:
		return uint64(len(t))
	case types.Int, types.Uint, types.Double, types.Bool, types.Null:
		return 1
	}
	if isConcatList(v) { // its Value() would materialize the whole list: walk it instead
		return sizeOfLister(v.(traits.Lister), limit)
	}
	switch t := v.(type) {
	case traits.Lister, traits.Mapper:
		return sizeOfNative(v.Value(), limit)
	case apiservercel.URL:
		// Its accessors re-read the parts (getQuery parses the query on every call).
		if t.URL == nil {
			return 1
		}
		return uint64(1 + len(t.Scheme) + len(t.Opaque) + len(t.Host) + len(t.Path) + len(t.RawPath) + len(t.RawQuery) + len(t.Fragment) + len(t.RawFragment))
	case apiservercel.Semver:
		// Comparisons walk the pre-release identifiers.
		n := uint64(1)
		for _, p := range t.Pre {
			n += uint64(len(p.VersionStr)) + 1
		}
		for _, b := range t.Build {
			n += uint64(len(b)) + 1
		}
		return n
	case apiservercel.Quantity:
		d, _ := quantityDigits(t)
		return d
	}
	return 1
}

// sizeOfLister walks a list through its iterator.
func sizeOfLister(l traits.Lister, limit uint64) uint64 {
	var n uint64
	for it := l.Iterator(); it.HasNext() == types.True; {
		n += elementUnits + sizeOf(it.Next(), limit-min(n, limit))
		if n > limit {
			return n
		}
	}
	return n
}

// sizeOfNative sizes the Go value behind a CEL value: what the dynamic client gives
// (map[string]any, []any, string, int64, ...) or CEL's own containers.
func sizeOfNative(x any, limit uint64) uint64 {
	var n uint64
	add := func(m uint64) bool {
		n += m
		return n > limit
	}
	switch t := x.(type) {
	case string:
		return uint64(len(t))
	case []byte:
		return uint64(len(t))
	case map[string]any:
		for k, e := range t {
			if add(elementUnits + uint64(len(k)) + sizeOfNative(e, limit-min(n, limit))) {
				return n
			}
		}
	case []any:
		for _, e := range t {
			if add(elementUnits + sizeOfNative(e, limit-min(n, limit))) {
				return n
			}
		}
	case []string:
		for _, e := range t {
			if add(elementUnits + uint64(len(e))) {
				return n
			}
		}
	case map[string]string:
		for k, e := range t {
			if add(elementUnits + uint64(len(k)+len(e))) {
				return n
			}
		}
	case []ref.Val:
		for _, e := range t {
			if add(elementUnits + sizeOf(e, limit-min(n, limit))) {
				return n
			}
		}
	case map[ref.Val]ref.Val:
		for k, e := range t {
			if add(elementUnits + sizeOf(k, limit-min(n, limit)) + sizeOf(e, limit-min(n, limit))) {
				return n
			}
		}
	case ref.Val:
		return sizeOf(t, limit)
	default:
		return sizeOfReflect(reflect.ValueOf(x), limit)
	}
	return n
}

// sizeOfReflect sizes other slices and maps (a CEL library may return []int64, for
// example) by reflection; anything else is a scalar of size 1.
func sizeOfReflect(rv reflect.Value, limit uint64) uint64 {
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		n := sat(uint64(rv.Len()), elementUnits)
		if n > limit {
			return n
		}
		for i := 0; i < rv.Len(); i++ {
			if e := rv.Index(i); e.CanInterface() {
				n += sizeOfNative(e.Interface(), limit-min(n, limit))
			}
			if n > limit {
				return n
			}
		}
		return n
	case reflect.Map:
		n := sat(uint64(rv.Len()), elementUnits)
		for it := rv.MapRange(); it.Next() && n <= limit; {
			if it.Key().CanInterface() && it.Value().CanInterface() {
				n += sizeOfNative(it.Key().Interface(), limit-min(n, limit)) +
					sizeOfNative(it.Value().Interface(), limit-min(n, limit))
			}
		}
		return n
	case reflect.String:
		return uint64(rv.Len())
	}
	return 1
}
