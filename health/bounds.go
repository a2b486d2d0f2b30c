package health

import (
	"io"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"strconv"
	"sync"
	"unicode/utf8"

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

// regexCacheSize bounds the compiled patterns kept between calls.
const regexCacheSize = 256

// compiledRegex is a pattern compiled for the guard: the program as cel-go's and the
// Kubernetes regex functions compile it (regexp.Compile), its estimated size, and the
// same program behind one context rune for findAll's later searches.
type compiledRegex struct {
	re   *regexp.Regexp
	prog uint64
	err  error

	afterOnce sync.Once
	afterRune *regexp.Regexp // nil until findAll needs it
	afterErr  error
}

// after returns the program behind a context rune, compiling it on first use (charged
// as the first compilation).
func (c *compiledRegex) after(f *interpreter.ExecutionFrame) (*regexp.Regexp, error) {
	if c.afterRune == nil && c.afterErr == nil {
		charge(f, compileUnits(c.prog))
	}
	c.afterOnce.Do(func() {
		c.afterRune, c.afterErr = regexp.Compile(`(?s:.)(` + c.re.String() + `)`)
	})
	return c.afterRune, c.afterErr
}

// compileUnits is the charge of compiling a program of prog instructions: ten units an
// instruction (the compiler and its analyses allocate several hundred bytes an
// instruction).
func compileUnits(prog uint64) uint64 { return 1 + sat(prog, 10) }

var (
	regexMu    sync.Mutex
	regexCache = map[string]*compiledRegex{}
)

// regexFor compiles pattern, charging its estimated program size first, or returns the
// cached result. A pattern that does not parse returns an entry with err set and is
// left to the implementation, whose error message rules see.
func regexFor(f *interpreter.ExecutionFrame, pattern string) *compiledRegex {
	regexMu.Lock()
	c, ok := regexCache[pattern]
	regexMu.Unlock()
	if ok {
		charge(f, 1)
		return c
	}
	charge(f, 1+uint64(len(pattern))/traversalFactor)
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return &compiledRegex{err: err}
	}
	prog := regexProgSize(parsed, 0)
	charge(f, compileUnits(prog))
	c = &compiledRegex{prog: prog}
	if c.re, c.err = regexp.Compile(pattern); c.err != nil {
		return c
	}
	regexMu.Lock()
	if len(regexCache) >= regexCacheSize {
		clear(regexCache)
	}
	regexCache[pattern] = c
	regexMu.Unlock()
	return c
}

// regexProgSize estimates the number of instructions regexp compiles re into: repeats
// are expanded, as the compiler does. It saturates instead of overflowing.
func regexProgSize(re *syntax.Regexp, depth int) uint64 {
	if depth > 1000 {
		return ^uint64(0) >> 1
	}
	sum := func() uint64 {
		n := uint64(0)
		for _, s := range re.Sub {
			n = satAdd(n, regexProgSize(s, depth+1))
		}
		return n
	}
	switch re.Op {
	case syntax.OpLiteral:
		return uint64(max(len(re.Rune), 1))
	case syntax.OpCapture:
		return satAdd(2, sum())
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return satAdd(1, sum())
	case syntax.OpConcat:
		return max(sum(), 1)
	case syntax.OpAlternate:
		return satAdd(sum(), uint64(len(re.Sub)))
	case syntax.OpRepeat:
		copies := re.Max
		if copies < 0 {
			copies = re.Min + 1
		}
		return sat(uint64(max(copies, 1)), satAdd(1, sum()))
	}
	return 1
}

// satAdd adds without overflow.
func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return ^uint64(0)
	}
	return s
}

// regexSearchCost is the charge of one search of a program of prog instructions over n
// bytes: every instruction may run once per input position.
func regexSearchCost(prog uint64, n int) uint64 {
	return 1 + sat(prog, uint64(n)+1)/traversalFactor
}

// boundedRegexCall runs matches, find or findAll with the pattern compiled and charged
// by the guard. It returns nil when the arguments are not what the functions take or
// the pattern does not compile: the implementation then gives its own result or error.
func boundedRegexCall(f *interpreter.ExecutionFrame, function string, vals []ref.Val) ref.Val {
	if len(vals) < 2 {
		return nil
	}
	s, ok1 := vals[0].(types.String)
	p, ok2 := vals[1].(types.String)
	if !ok1 || !ok2 {
		return nil
	}
	c := regexFor(f, string(p))
	if c.err != nil {
		return nil
	}
	switch function {
	case "matches":
		charge(f, regexSearchCost(c.prog, len(s)))
		return types.Bool(c.re.MatchString(string(s)))
	case "find":
		charge(f, regexSearchCost(c.prog, len(s)))
		return types.String(c.re.FindString(string(s)))
	case "findAll":
		limit := int64(-1)
		if len(vals) > 2 {
			n, ok := vals[2].(types.Int)
			if !ok {
				return nil
			}
			limit = int64(n)
		}
		return types.NewStringList(types.DefaultTypeAdapter, findAll(f, c, string(s), limit))
	}
	return nil
}

// findAll is regexp's FindAllString(s, limit) with every rune that a search reads
// charged c.prog tenths of a unit, so a search that would run past the budget stops in
// the middle. It follows regexp's rules for successive matches: a search starts where
// the previous match ended, and an empty match right after a match is skipped. A search
// that starts inside s runs c.afterRune from the rune before, so that ^, \b and \B see
// the same context as in one pass over s.
func findAll(f *interpreter.ExecutionFrame, c *compiledRegex, s string, limit int64) []string {
	// Every rune read costs the program's instructions plus the reader's own call.
	r := &chargedReader{s: s, f: f, a: budgetOf(f), prog: c.prog + 2}
	var out []string
	prevEnd := -1
	for pos := 0; (limit < 0 || int64(len(out)) < limit) && pos <= len(s); {
		// A search allocates a machine's input and its result: searchUnits.
		charge(f, searchUnits)
		var start, end int
		if pos == 0 {
			r.i = 0
			loc := c.re.FindReaderIndex(r)
			if loc == nil {
				break
			}
			start, end = loc[0], loc[1]
		} else {
			_, w := utf8.DecodeLastRuneInString(s[:pos])
			from := pos - w
			r.i = from
			after, err := c.after(f)
			if err != nil {
				break // cannot happen: the pattern compiled on its own
			}
			loc := after.FindReaderSubmatchIndex(r)
			if loc == nil {
				break
			}
			start, end = from+loc[2], from+loc[3]
		}
		accept := true
		if end == start && start == prevEnd {
			accept = false // no empty match right after a match
		}
		if end == start {
			if start >= len(s) {
				pos = len(s) + 1
			} else {
				_, w := utf8.DecodeRuneInString(s[start:])
				pos = start + w
			}
		} else {
			pos = end
		}
		prevEnd = end
		if accept {
			charge(f, 1+uint64(end-start)/traversalFactor) // the match is copied
			out = append(out, s[start:end])
		}
	}
	return out
}

// searchUnits is the fixed charge of one of findAll's searches.
const searchUnits = 4

// chargedReader reads s from i rune by rune, charging prog tenths of a unit a rune to
// the evaluation's budget (CostLimit when there is none).
type chargedReader struct {
	s      string
	i      int
	f      *interpreter.ExecutionFrame
	a      *evalActivation
	prog   uint64
	tenths uint64
	spent  uint64 // charged without an activation
}

// ReadRune implements io.RuneReader.
func (r *chargedReader) ReadRune() (rune, int, error) {
	if r.i >= len(r.s) {
		return 0, 0, io.EOF
	}
	checkInterrupt(r.f)
	r.tenths += r.prog
	if r.tenths >= traversalFactor {
		units := r.tenths / traversalFactor
		r.tenths %= traversalFactor
		if r.a == nil {
			r.spent += units
			if r.spent > CostLimit {
				panic(costExceeded)
			}
		} else if units > r.a.remaining {
			r.a.remaining = 0
			panic(costExceeded)
		} else {
			r.a.remaining -= units
		}
	}
	c, w := utf8.DecodeRuneInString(r.s[r.i:])
	r.i += w
	return c, w, nil
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
