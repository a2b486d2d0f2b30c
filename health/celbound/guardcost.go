// The call guard's cost model (guard.go): which functions are charged how, and the
// upper bound of one call's work and result size from its arguments.

package celbound

import (
	"math/bits"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// costClass says how guardedCall.cost bounds one function.
type costClass uint8

const (
	costLinear       costClass = iota // work and result ≤ the arguments' sizes
	costCompare                       // ==, <, ...: ≤ the smaller argument
	costAdd                           // +: strings and bytes copy both; lists concatenate lazily
	costSize                          // size(): counts the runes of a string
	costReplace                       // string replace
	costSplit                         // string split
	costJoin                          // list join
	costIndexOf                       // string indexOf / lastIndexOf: runes and a naive search
	costFormat                        // string format
	costQuote                         // strings.quote: escapes can grow a byte to \u00XX
	costRange                         // lists.range(n): n elements
	costQuadratic                     // sets.*, distinct: every element against every other
	costSort                          // sort: n log n comparisons
	costParse                         // parsers: error messages quote the input, a unit a byte
	costRunes                         // string functions that convert to []rune first
	costQuantity                      // quantity(), isQuantity(): bounded and charged by boundedQuantityCall
	costRegexBounded                  // matches, find, findAll: compiled and run by boundedRegexCall
	costQuantityOp                    // methods of quantities (and semvers, which share names)
	costFlatten                       // flatten(list, depth)
	costTimestampGet                  // timestamp accessors: a time zone name costs tzUnits
)

// unguarded are the functions whose cost does not depend on their arguments.
var unguarded = map[string]bool{
	"!_": true, "-_": true, "_%_": true, "_*_": true, "_/_": true, "_-_": true,
	"dyn": true, "type": true,
	"optional.none": true, "optional.of": true, "optional.ofNonZeroValue": true,
	"hasValue": true, "value": true, "or": true, "orValue": true,
	"first": true, "last": true,
	// Logical operators and the conditional are planned as their own nodes, not calls,
	// and are never guarded; listed for completeness.
	"_&&_": true, "_||_": true, "_?_:_": true,
}

// costClasses gives the class of the functions whose work is not linear in their
// arguments. Functions not listed (and not unguarded) are costLinear.
var costClasses = map[string]costClass{
	"_==_": costCompare, "_!=_": costCompare, "_<_": costCompare, "_<=_": costCompare,
	"_>_": costCompare, "_>=_": costCompare,
	"_+_":         costAdd,
	"size":        costSize,
	"replace":     costReplace,
	"split":       costSplit,
	"join":        costJoin,
	"indexOf":     costIndexOf,
	"lastIndexOf": costIndexOf,
	"matches":     costRegexBounded, "find": costRegexBounded, "findAll": costRegexBounded,
	"format":                costFormat,
	"strings.quote":         costQuote,
	"lists.range":           costRange,
	"sets.contains":         costQuadratic,
	"sets.equivalent":       costQuadratic,
	"sets.intersects":       costQuadratic,
	"distinct":              costQuadratic,
	"sort":                  costSort,
	"@sortByAssociatedKeys": costSort,
	"flatten":               costFlatten,
	"add":                   costQuantityOp, "sub": costQuantityOp, "compareTo": costQuantityOp,
	"isGreaterThan": costQuantityOp, "isLessThan": costQuantityOp, "asInteger": costQuantityOp,
	"asApproximateFloat": costQuantityOp, "isInteger": costQuantityOp, "sign": costQuantityOp,
	"getDate": costTimestampGet, "getDayOfMonth": costTimestampGet, "getDayOfWeek": costTimestampGet,
	"getDayOfYear": costTimestampGet, "getFullYear": costTimestampGet, "getHours": costTimestampGet,
	"getMilliseconds": costTimestampGet, "getMinutes": costTimestampGet, "getMonth": costTimestampGet,
	"getSeconds": costTimestampGet,
	// Parsers and validators allocate several times their input (runes, error messages
	// that quote it): a whole unit per byte.
	"ip": costParse, "isIP": costParse, "ip.isCanonical": costParse, "cidr": costParse,
	"isCIDR": costParse, "url": costParse, "isURL": costParse, "semver": costParse,
	"isSemver": costParse, "quantity": costQuantity, "isQuantity": costQuantity,
	"timestamp": costParse, "duration": costParse, "int": costParse, "uint": costParse,
	"double": costParse, "bool": costParse, "validate": costParse,
	"containsIP": costParse, "containsCIDR": costParse,
	// Rune-indexed string functions: []rune of the input (4 bytes a rune) first.
	"charAt": costRunes, "substring": costRunes, "reverse": costRunes,
	"lowerAscii": costRunes, "upperAscii": costRunes, "trim": costRunes,
}

// cost is an upper bound, in cost units, of the work and the result size of the call
// with arguments a, b (nil when absent) and all of them in rest (nil for one or two
// arguments). Sizes are counted by sizeOf, never past the budget left.
func (g *guardedCall) cost(f *interpreter.ExecutionFrame, a, b ref.Val, rest []ref.Val) uint64 {
	limit := remaining(f)
	size := func(v ref.Val) uint64 {
		if v == nil {
			return 0
		}
		return sizeOf(v, limit)
	}
	units := func(n uint64) uint64 { return 1 + n/traversalFactor }
	switch g.class {
	case costCompare:
		if isQuantity(a) || isQuantity(b) {
			return quantityOpCost(a, b)
		}
		if isScalar(a) || isScalar(b) {
			return 1
		}
		return units(min(size(a), size(b)))
	case costAdd:
		switch a.(type) {
		case types.String, types.Bytes:
			return units(size(a) + size(b))
		}
		return 1 + count(b) // a list grows by b's elements
	case costSize:
		if s, ok := a.(types.String); ok {
			return units(uint64(len(s)))
		}
		return 1
	case costReplace:
		s, old, repl := str(a), str(b), ""
		n := int64(-1)
		if len(rest) > 2 {
			repl = str(rest[2])
		}
		if len(rest) > 3 {
			if i, ok := rest[3].(types.Int); ok {
				n = int64(i)
			}
		}
		count := uint64(len(s)) + 1 // replacements possible: one per byte for an empty old
		if old != "" {
			count = uint64(len(s)/len(old)) + 1
		}
		if n >= 0 && uint64(n) < count {
			count = uint64(n)
		}
		return units(uint64(len(s)) + sat(count, uint64(len(repl))))
	case costSplit:
		s, sep := str(a), str(b)
		parts := uint64(len(s)) + 1
		if sep != "" {
			parts = uint64(len(s)/len(sep)) + 1
		}
		return units(uint64(len(s))) + parts
	case costJoin:
		return units(size(a) + sat(count(a), uint64(len(str(b)))))
	case costIndexOf:
		s, ok := a.(types.String)
		if !ok { // the list function of the same name: linear
			return units(size(a) + size(b))
		}
		sub := str(b)
		// []rune of both (4 bytes a rune) and a naive search of every offset.
		return units(4*uint64(len(s)+len(sub)) + sat(uint64(len(s)), uint64(max(len(sub), 1))))
	case costFormat:
		// Every argument printed in full (a number up to 32 bytes), plus the widest
		// precision the format string could ask for once per verb.
		verbs := uint64(strings.Count(str(a), "%"))
		return units(size(a) + sat(32, size(b)) + sat(verbs, 1000))
	case costParse:
		return 1 + size(a) + size(b)
	case costRunes:
		if _, ok := a.(types.String); ok {
			return units(sat(4, size(a)))
		}
		return units(size(a) + size(b)) // the list function of the same name
	case costQuote:
		return units(sat(6, size(a)))
	case costRange:
		if n, ok := a.(types.Int); ok && n > 0 {
			return 1 + uint64(n)
		}
		return 1
	case costQuadratic:
		// Every element of one list against all of the other (or itself).
		if b == nil {
			return units(sat(size(a), count(a)+1))
		}
		return units(sat(size(a), count(b)+1))
	case costQuantityOp:
		if isQuantity(a) || isQuantity(b) {
			return quantityOpCost(a, b)
		}
		return units(size(a) + size(b)) // semver's methods of the same names
	case costFlatten:
		return flattenCost(f, a, b)
	case costTimestampGet:
		if _, ok := b.(types.String); ok {
			return tzUnits + size(b) // the name is copied into every path tried
		}
		return 1
	case costQuantity, costRegexBounded:
		// Arguments the bounded calls do not take: the implementation reports them.
		return units(size(a) + size(b))
	case costSort:
		return units(sat(size(a), uint64(bits.Len64(count(a))+1)))
	default:
		total := uint64(0)
		if rest == nil {
			total = size(a) + size(b)
		} else {
			for _, v := range rest {
				total += size(v)
				if total > limit {
					break
				}
			}
		}
		return units(total)
	}
}

// count is the number of elements of a list or entries of a map, 0 for anything else.
func count(v ref.Val) uint64 {
	if l, ok := v.(traits.Sizer); ok {
		if n, ok := l.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 0
}

// str is the Go string of a CEL string, or "" for anything else.
func str(v ref.Val) string {
	s, _ := v.(types.String)
	return string(s)
}

// isQuantity reports whether v is a Kubernetes quantity.
func isQuantity(v ref.Val) bool {
	_, ok := v.(apiservercel.Quantity)
	return ok
}

// isScalar reports whether v is a value whose comparison is O(1).
func isScalar(v ref.Val) bool {
	switch v.(type) {
	case types.Int, types.Uint, types.Double, types.Bool, types.Null:
		return true
	}
	return false
}
