package celbound

import (
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// Bounds on work that depends on the content of an argument, not only on its size.
//
// The call guard (guard.go) charges most calls from the sizes of their arguments. A few
// library functions do work that a short argument can make unbounded, so size alone
// would under-charge them:
//
//   - quantity() and isQuantity(): apimachinery's ParseQuantity does big-integer work
//     proportional to the value of the exponent ("1e-2147483647" pins a CPU for
//     minutes) and quadratic in a long run of digits. boundQuantity rejects an exponent
//     outside int32 (as ParseQuantity itself does upstream), rejects a value of
//     10^maxQuantityExponent or more, and rewrites a nonzero value below 10^-30 to
//     ±1e-30, which ParseQuantity rounds up to ±1n exactly as the original; a zero
//     mantissa with any exponent is 0. The parse is charged one unit a byte plus the
//     square of the digit count in 16-digit words. Operations on quantities (add, sub,
//     compareTo, ==, ...) align the scales of both operands, so they are charged by the
//     digits of the aligned values (quantityDigits), which the parse bound keeps small.
//   - matches, find and findAll: RE2 is linear in its input for each instruction of the
//     compiled program, and `(?:.*[a-y]){1000}#` is 18 bytes but 3,003 instructions. The
//     program size is estimated from the parsed pattern before it is compiled
//     (regexProgSize), and a search is charged program size × input length.
//     findAll repeats the search after every match and each search can scan to the end
//     of the input (`.*z|a` over a run of a's is quadratic), so findAll searches
//     through a reader that charges every rune it reads, and stops mid-search when the
//     budget is gone.
//   - flatten(list, depth) copies an element once per level it is lifted through:
//     charged size × min(depth, nesting).
//   - the timestamp accessors that take a time zone name load the zone (a file read and
//     a parse) on every call: charged tzUnits.
//
// Every other function of the environment does work linear in the sizes of its
// arguments or bounded by a constant; docs/rules.md lists them with what each is charged.

// maxQuantityExponent is the largest power of ten a quantity may reach in a rule: an
// operation on two quantities aligns their scales, so a larger value makes every
// comparison build an integer of that many digits.
const maxQuantityExponent = 10000

// minQuantityExponent is where boundQuantity starts rewriting tiny values: anything
// nonzero below 10^minQuantityExponent rounds up to 1n (10^-9) in ParseQuantity.
const minQuantityExponent = -30

// errQuantityRange is the error of quantity() on a value boundQuantity refuses.
const errQuantityRange = "quantities in health rules must be below 1e%d and have an exponent within int32"

// quantityScan is what boundQuantity learns from a quantity string.
type quantityScan struct {
	negative bool
	digits   int   // significant digits of the mantissa (without leading zeros)
	top      int64 // power of ten just above the most significant digit
	exponent bool  // the suffix is a decimal exponent (e/E)
	zero     bool  // the mantissa is zero
}

// scanQuantity reads the number and the suffix of s the way ParseQuantity does. ok is
// false when s is not shaped like a quantity; ParseQuantity then reports its own error.
func scanQuantity(s string) (q quantityScan, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		q.negative = s[i] == '-'
		i++
	}
	intStart := i
	for i < len(s) && s[i] == '0' {
		i++
	}
	intSig := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intDigits := i - intSig
	_ = intStart
	fracLeadingZeros, fracDigits := 0, 0
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac := s[start:i]
		if intDigits == 0 {
			for fracLeadingZeros < len(frac) && frac[fracLeadingZeros] == '0' {
				fracLeadingZeros++
			}
			fracDigits = len(frac) - fracLeadingZeros
		} else {
			fracDigits = len(frac)
		}
	}
	q.digits = intDigits + fracDigits
	q.zero = q.digits == 0
	exp := int64(0)
	if suffix := s[i:]; len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
		e, err := strconv.ParseInt(suffix[1:], 10, 32)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return q, false // reported as out of range by the caller
			}
			return q, true // not an exponent: ParseQuantity reports the suffix
		}
		exp, q.exponent = e, true
	}
	if intDigits > 0 {
		q.top = exp + int64(intDigits)
	} else {
		q.top = exp - int64(fracLeadingZeros)
	}
	return q, true
}

// boundQuantity returns the string to hand ParseQuantity in place of s, or ok false
// when the quantity is out of the range rules may use (see errQuantityRange).
func boundQuantity(s string) (string, bool) {
	q, ok := scanQuantity(s)
	if !ok {
		return "", false
	}
	if !q.exponent {
		return s, true // SI suffixes stay within 10^18 and 2^60
	}
	switch {
	case q.zero:
		return "0", true
	case q.top > maxQuantityExponent:
		return "", false
	case q.top < minQuantityExponent:
		if q.negative {
			return "-1e-30", true
		}
		return "1e-30", true
	}
	return s, true
}

// quantityParseCost is the charge of parsing s: a unit a byte, plus the big-integer
// parse of the digits, quadratic in 16-digit words.
func quantityParseCost(s string) uint64 {
	digits := uint64(0)
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			digits++
		}
	}
	words := digits/16 + 1
	return 1 + uint64(len(s)) + sat(words, words)/traversalFactor
}

// boundedQuantityCall runs quantity() or isQuantity() on a bounded argument. It
// returns nil when the argument is not a string (the implementation reports that).
func boundedQuantityCall(f *interpreter.ExecutionFrame, function string, arg ref.Val, call func(ref.Val) ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return nil
	}
	charge(f, quantityParseCost(string(s)))
	b, ok := boundQuantity(string(s))
	if !ok {
		if function == "isQuantity" {
			return types.False
		}
		return types.NewErr(errQuantityRange, maxQuantityExponent)
	}
	return call(types.String(b))
}

// quantityDigits is the number of decimal digits of q once aligned to scale (the
// larger scale of an operation's operands), and q's own scale.
func quantityDigits(q apiservercel.Quantity) (digits uint64, scale int64) {
	if q.Quantity == nil {
		return 1, 0
	}
	c := q.Quantity.DeepCopy()
	d := c.AsDec()
	return uint64(d.UnscaledBig().BitLen())*30103/100000 + 1, int64(d.Scale())
}

// quantityOpCost is the charge of an operation on quantities a and b (b may be an int
// or nil): the digits of both once aligned to the larger scale.
func quantityOpCost(a, b ref.Val) uint64 {
	type dq struct {
		digits uint64
		scale  int64
	}
	var qs []dq
	for _, v := range []ref.Val{a, b} {
		if q, ok := v.(apiservercel.Quantity); ok {
			d, s := quantityDigits(q)
			qs = append(qs, dq{d, s})
		}
	}
	if len(qs) == 0 {
		return 1
	}
	maxScale := qs[0].scale
	for _, q := range qs {
		maxScale = max(maxScale, q.scale)
	}
	total := uint64(0)
	for _, q := range qs {
		total += q.digits + uint64(maxScale-q.scale)
	}
	return 1 + total/traversalFactor
}

// flattenCost is the charge of flatten(list, depth): every element is copied once per
// level it is lifted through.
func flattenCost(f *interpreter.ExecutionFrame, list, depth ref.Val) uint64 {
	limit := remaining(f)
	size := sizeOf(list, limit)
	d := uint64(1)
	if n, ok := depth.(types.Int); ok && n > 1 && size <= limit {
		d = min(uint64(n), nestingOf(list, 0, limit))
	}
	return 1 + sat(size, max(d, 1))/traversalFactor
}

// nestingOf is how deep lists nest in v (1 for a flat list), not walking past limit
// levels.
func nestingOf(v ref.Val, depth, limit uint64) uint64 {
	l, ok := v.(traits.Lister)
	if !ok || depth >= limit {
		return 0
	}
	deepest := uint64(0)
	for it := l.Iterator(); it.HasNext() == types.True; {
		deepest = max(deepest, nestingOf(it.Next(), depth+1, limit))
	}
	return deepest + 1
}

// tzUnits is the charge of a timestamp accessor given a time zone name: loading the zone
// reads and parses its file on every call (tens of microseconds and about 40 KB
// allocated), so the budget pays for at most 500 of them.
const tzUnits = 2000
