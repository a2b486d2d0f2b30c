// Bounds of the regex functions (matches, find, findAll; see bounds.go): patterns are
// compiled once, charged by their estimated program size, and searched through a reader
// that charges every rune.

package celbound

import (
	"io"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

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
	a      *activation
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
