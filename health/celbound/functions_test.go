package celbound_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// callsOf is the audit of the rules' CEL environment: for every function it exposes,
// calls that take their arguments from the object (S and T strings, N an int, L a list
// of 10,000 strings, D a list nested 2,000 deep, M a map of 10,000 keys), so that
// anyone who may write an object chooses them. TestEveryFunctionIsAudited fails when
// the environment gains a function (a cel-go or Kubernetes upgrade, a raised
// CompatibilityVersion) that is not listed here.
var callsOf = map[string][]string{
	"!_":                            {"!(S == T)"},
	"-_":                            {"-N", "-double(N)"},
	"@in":                           {"S in L", "S in M"},
	"in":                            {"S in L"},
	"_in_":                          {"S in M"},
	"@not_strictly_false":           {"L.all(x, x == S)"},
	"__not_strictly_false__":        {"L.exists(x, x == S)"},
	"@sortByAssociatedKeys":         {"L.sortBy(x, x)", "L.sortBy(x, x.size())"},
	"_!=_":                          {"L != L", "object != object"},
	"_==_":                          {"object == object", "D == D", "quantity(S) == quantity(T)"},
	"_%_":                           {"N % 7"},
	"_*_":                           {"N * N", "double(N) * 1.5"},
	"_/_":                           {"N / 3", "double(N) / 0.0"},
	"_-_":                           {"N - 1", "timestamp(S) - timestamp(T)", "timestamp(S) - duration(T)"},
	"_+_":                           {"S + T", "L + L", "bytes(S) + bytes(T)", "duration(S) + duration(T)", "timestamp(S) + duration(T)"},
	"_<=_":                          {"S <= T", "N <= double(N)"},
	"_<_":                           {"S < T", "bytes(S) < bytes(T)", "timestamp(S) < timestamp(T)"},
	"_>=_":                          {"S >= T", "duration(S) >= duration(T)"},
	"_>_":                           {"S > T", "N > 0u"},
	"_&&_":                          {"S == T && N > 0"},
	"_||_":                          {"S == T || N > 0"},
	"_?_:_":                         {"N > 0 ? S : T"},
	"_?._":                          {"object.?s.orValue('') == S"},
	"_[?_]":                         {"L[?N].hasValue()", "M[?S].hasValue()"},
	"_[_]":                          {"L[N]", "M[S]", "D[0]"},
	"add":                           {"quantity(S).add(quantity(T)).isInteger()", "quantity(S).add(N)"},
	"sub":                           {"quantity(S).sub(quantity(T))", "quantity(S).sub(N)"},
	"compareTo":                     {"quantity(S).compareTo(quantity(T))", "semver(S, true).compareTo(semver(T, true))"},
	"isGreaterThan":                 {"quantity(S).isGreaterThan(quantity(T))", "semver(S).isGreaterThan(semver(T))"},
	"isLessThan":                    {"quantity(S).isLessThan(quantity(T))", "semver(S, true).isLessThan(semver(T, true))"},
	"asInteger":                     {"quantity(S).asInteger()"},
	"asApproximateFloat":            {"quantity(S).asApproximateFloat()"},
	"isInteger":                     {"quantity(S).isInteger()"},
	"sign":                          {"sign(quantity(S))"},
	"quantity":                      {"quantity(S)", "L.all(x, quantity(S) == quantity(T))"},
	"isQuantity":                    {"isQuantity(S)", "L.all(x, isQuantity(S))"},
	"major":                         {"semver(S, true).major()"},
	"minor":                         {"semver(S).minor()"},
	"patch":                         {"semver(S).patch()"},
	"semver":                        {"semver(S)", "semver(S, true)", "[semver(S, true)].all(v, L.all(x, v.compareTo(v) == 0))"},
	"isSemver":                      {"isSemver(S)", "isSemver(S, true)"},
	"bool":                          {"bool(S)", "bool(N > 0)"},
	"bytes":                         {"bytes(S)", "bytes(bytes(S))"},
	"cel.@mapInsert":                {"L.transformMapEntry(i, v, {v: i}).size()", "M.transformMapEntry(k, v, {v: k}).size()"},
	"charAt":                        {"S.charAt(N)", "S.charAt(1000)"},
	"cidr":                          {"cidr(S)"},
	"containsCIDR":                  {"cidr('10.0.0.0/8').containsCIDR(S)", "cidr(S).containsCIDR(cidr(T))"},
	"containsIP":                    {"cidr('10.0.0.0/8').containsIP(S)", "cidr(S).containsIP(ip(T))"},
	"contains":                      {"S.contains(T)"},
	"distinct":                      {"L.distinct()", "D.distinct()"},
	"double":                        {"double(S)", "double(N)", "double(uint(N))", "double(1.5)"},
	"duration":                      {"duration(S)", "duration(duration(S))"},
	"dyn":                           {"dyn(S)"},
	"endsWith":                      {"S.endsWith(T)"},
	"family":                        {"ip(S).family()"},
	"find":                          {"S.find(T)", "T.find(S)"},
	"findAll":                       {"S.findAll(T)", "T.findAll(S)", "S.findAll(T, N)"},
	"first":                         {"L.first()"},
	"last":                          {"L.last()"},
	"flatten":                       {"D.flatten()", "D.flatten(N)", "D.flatten(2000)", "[L, L, D].flatten(N)"},
	"format":                        {"T.format([S, N, L])", "S.format([T, N, M])"},
	"format.byte":                   {"format.byte().validate(S)"},
	"format.date":                   {"format.date().validate(S)"},
	"format.datetime":               {"format.datetime().validate(S)"},
	"format.dns1035Label":           {"format.dns1035Label().validate(S)"},
	"format.dns1035LabelPrefix":     {"format.dns1035LabelPrefix().validate(S)"},
	"format.dns1123Label":           {"format.dns1123Label().validate(S)"},
	"format.dns1123LabelPrefix":     {"format.dns1123LabelPrefix().validate(S)"},
	"format.dns1123Subdomain":       {"format.dns1123Subdomain().validate(S)"},
	"format.dns1123SubdomainPrefix": {"format.dns1123SubdomainPrefix().validate(S)"},
	"format.labelValue":             {"format.labelValue().validate(S)"},
	"format.named":                  {"format.named(S).hasValue()", "format.named(S).value().validate(T)"},
	"format.qualifiedName":          {"format.qualifiedName().validate(S)"},
	"format.uri":                    {"format.uri().validate(S)"},
	"format.uuid":                   {"format.uuid().validate(S)"},
	"validate":                      {"format.dns1123Subdomain().validate(S).hasValue()"},
	"getDate":                       {"timestamp(S).getDate()", "timestamp(S).getDate(T)", "L.all(x, timestamp(0).getDate(T) > 0)"},
	"getDayOfMonth":                 {"timestamp(S).getDayOfMonth(T)"},
	"getDayOfWeek":                  {"timestamp(S).getDayOfWeek(T)"},
	"getDayOfYear":                  {"timestamp(S).getDayOfYear(T)"},
	"getFullYear":                   {"timestamp(S).getFullYear(T)", "L.all(x, timestamp(0).getFullYear(T) > 0)"},
	"getHours":                      {"timestamp(S).getHours(T)", "duration(S).getHours()"},
	"getMilliseconds":               {"timestamp(S).getMilliseconds(T)", "duration(S).getMilliseconds()"},
	"getMinutes":                    {"timestamp(S).getMinutes(T)", "duration(S).getMinutes()"},
	"getMonth":                      {"timestamp(S).getMonth(T)"},
	"getSeconds":                    {"timestamp(S).getSeconds(T)", "duration(S).getSeconds()"},
	"getEscapedPath":                {"url(S).getEscapedPath()"},
	"getHost":                       {"url(S).getHost()"},
	"getHostname":                   {"url(S).getHostname()"},
	"getPort":                       {"url(S).getPort()"},
	"getQuery":                      {"url(S).getQuery()", "[url(S)].all(u, L.all(x, u.getQuery().size() >= 0))"},
	"getScheme":                     {"url(S).getScheme()"},
	"hasValue":                      {"optional.of(S).hasValue()"},
	"value":                         {"optional.ofNonZeroValue(S).value()"},
	"or":                            {"optional.none().or(optional.of(S)).hasValue()"},
	"orValue":                       {"optional.none().orValue(S)"},
	"optional.none":                 {"optional.none().hasValue()"},
	"optional.of":                   {"optional.of(L).hasValue()"},
	"optional.ofNonZeroValue":       {"optional.ofNonZeroValue(S).hasValue()"},
	"optional.unwrap":               {"optional.unwrap([optional.of(S), optional.none()])"},
	"unwrapOpt":                     {"[optional.of(S), optional.of(T)].unwrapOpt()"},
	"includes":                      {"L.all(x, x in [S])"},
	"indexOf":                       {"S.indexOf(T)", "S.indexOf(T, N)", "L.indexOf(S)"},
	"lastIndexOf":                   {"S.lastIndexOf(T)", "S.lastIndexOf(T, N)", "L.lastIndexOf(S)"},
	"int":                           {"int(S)", "int(double(N))", "int(timestamp(S))", "int(duration(S))", "int(uint(N))", "int(N)"},
	"uint":                          {"uint(S)", "uint(N)", "uint(double(N))", "uint(uint(N))"},
	"ip.isCanonical":                {"ip.isCanonical(S)"},
	"ip":                            {"ip(S)", "cidr(S).ip()"},
	"isCIDR":                        {"isCIDR(S)"},
	"isIP":                          {"isIP(S)"},
	"isURL":                         {"isURL(S)"},
	"isGlobalUnicast":               {"ip(S).isGlobalUnicast()"},
	"isLinkLocalMulticast":          {"ip(S).isLinkLocalMulticast()"},
	"isLinkLocalUnicast":            {"ip(S).isLinkLocalUnicast()"},
	"isLoopback":                    {"ip(S).isLoopback()"},
	"isUnspecified":                 {"ip(S).isUnspecified()"},
	"masked":                        {"cidr(S).masked()"},
	"prefixLength":                  {"cidr(S).prefixLength()"},
	"join":                          {"L.join(S)", "L.join()"},
	"lists.range":                   {"lists.range(N)", "lists.range(N).size()"},
	"lowerAscii":                    {"S.lowerAscii()"},
	"upperAscii":                    {"S.upperAscii()"},
	"matches":                       {"S.matches(T)", "T.matches(S)", "matches(S, T)", "L.all(x, x.matches(T))"},
	"max":                           {"L.max()", "[int(N), 1].max()"},
	"min":                           {"L.min()", "[int(N), 1].min()"},
	"sum":                           {"[N, N].sum()", "[duration(S)].sum()"},
	"sort":                          {"L.sort()", "[int(N), 3, 1].sort()"},
	"isSorted":                      {"L.isSorted()"},
	"reverse":                       {"L.reverse()", "S.reverse()"},
	"slice":                         {"L.slice(0, N)", "L.slice(N, N)"},
	"replace":                       {"S.replace(T, S)", "S.replace(T, S, N)", "S.replace('', S)"},
	"sets.contains":                 {"sets.contains(L, L)", "sets.contains(D, D)"},
	"sets.equivalent":               {"sets.equivalent(L, L)"},
	"sets.intersects":               {"sets.intersects(L, [S])"},
	"size":                          {"size(S)", "S.size()", "L.size()", "size(M)", "bytes(S).size()", "size(bytes(S))"},
	"split":                         {"S.split(T)", "S.split(T, N)", "S.split('')"},
	"startsWith":                    {"S.startsWith(T)"},
	"string": {"string(N)", "string(ip(S))", "string(bytes(S))", "string(double(N))", "string(duration(S))",
		"string(timestamp(S))", "string(cidr(S))", "string(uint(N))", "string(N > 0)", "string(S)"},
	"strings.quote": {"strings.quote(S)"},
	"substring":     {"S.substring(N)", "S.substring(0, N)"},
	"timestamp":     {"timestamp(S)", "timestamp(N)", "timestamp(timestamp(S))"},
	"trim":          {"S.trim()"},
	"type":          {"type(S) == string"},
	"url":           {"url(S)"},
}

// notCallable are the functions of the environment that a health rule cannot reach:
// the authorizer library's, whose receivers come only from the `authorizer` variable
// of admission policies, which rules do not have (TestEveryFunctionIsAudited checks that
// such a call does not compile).
var notCallable = []string{"allowed", "check", "error", "errored", "fieldSelector", "group",
	"labelSelector", "name", "namespace", "path", "reason", "resource", "serviceAccount", "subresource"}

// adversarialStrings are the values S and T take: extreme exponents, long runs of
// digits, huge repeat counts and quadratic alternations, long and non-ASCII text,
// oversized URLs, semvers and time zones.
func adversarialStrings() []string {
	return []string{
		"1e-2147483647", "2E6024865272343", "1e999999999", "-1e-99999", "0e-2147483647", "1e2147483647", "9e10001", "1e10000",
		strings.Repeat("9", 100000), "0." + strings.Repeat("0", 50000) + "1", strings.Repeat("1", 5000) + "e5000",
		"-" + strings.Repeat("7", 20000) + ".5Ei",
		"(?:.*[a-y]){1000}#", ".*z|a", "(a|aa)*b", "(x+x+)+y", "a{1000}", `(?i)\b\w+\b`, "^", "", "(", `(?:(?:a{1000}){1000})`,
		strings.Repeat("a", 64<<10), strings.Repeat("ab", 32<<10), strings.Repeat("é", 20000),
		"1.2.3-" + strings.Repeat("a.", 20000) + "a", "v1.2.3", "https://x/?" + strings.Repeat("a=b&", 20000) + "#f",
		"10.0.0.1", "::1", "10.0.0.0/8", "fe80::1%" + strings.Repeat("z", 10000), strings.Repeat("1", 10000),
		"America/New_York", "Europe/Paris", "+05:30", "../../../../etc/passwd", strings.Repeat("A/", 5000),
		"%.999999999f %s %e", strings.Repeat("%s", 1000), "%" + strings.Repeat("9", 30) + "d",
		"2024-01-01T00:00:00Z", "1000000000000h", strings.Repeat("1h", 10000), "1Gi", "1.5", "true",
	}
}

// adversarialInts are the values N takes.
var adversarialInts = []int64{1 << 62, -1, 0, 3, 1000, 1_000_000_000, math.MaxInt64, math.MinInt64}

// adversarialLists are the list, map and nested list of adversarialObject, built once
// (evaluation only reads them).
var adversarialLists = sync.OnceValue(func() map[string]any {
	items := make([]any, 10000)
	m := make(map[string]any, 10000)
	for i := range items {
		items[i] = fmt.Sprintf("item-%05d", i)
		m[fmt.Sprintf("k%05d", i)] = "v"
	}
	var deep any = []any{"x"}
	for range 2000 {
		deep = []any{deep, "y"}
	}
	return map[string]any{"l": items, "m": m, "d": deep}
})

// adversarialObject builds the object the calls read.
func adversarialObject(s, t string, n int64) map[string]any {
	lists := adversarialLists()
	return map[string]any{"s": s, "t": t, "n": n, "l": lists["l"], "m": lists["m"], "d": lists["d"]}
}

// expand replaces the placeholders of a call with the object's fields.
func expand(call string) string {
	r := strings.NewReplacer("S", "object.s", "T", "object.t", "N", "object.n", "L", "object.l", "M", "object.m", "D", "object.d")
	// Only whole placeholders: replace in a copy where identifiers are protected.
	var b strings.Builder
	for i := 0; i < len(call); i++ {
		c := call[i]
		if strings.IndexByte("STNLMD", c) >= 0 && (i == 0 || !isIdent(call[i-1])) && (i+1 == len(call) || !isIdent(call[i+1])) {
			b.WriteString(r.Replace(string(c)))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isIdent(c byte) bool {
	return c == '_' || c == '\'' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// compileRule compiles one rule for configmaps.
func compileRule(expr string) (*health.Evaluator, error) {
	return health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{globalSet("g", nil, configMapRule(expr, ""))}, nil)
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestEveryFunctionIsAudited: every function of the environment is in callsOf (or
// notCallable, and then a call cannot compile), and every listed call compiles.
func TestEveryFunctionIsAudited(t *testing.T) {
	listed := map[string]bool{}
	for _, name := range notCallable {
		listed[name] = true
	}
	for name, calls := range callsOf {
		listed[name] = true
		for _, call := range calls {
			if _, err := compileRule(expand(call)); err != nil {
				t.Errorf("%s: %s does not compile: %v", name, call, err)
			}
		}
	}
	for _, name := range exposedFunctions(t) {
		if !listed[name] {
			t.Errorf("function %q of the CEL environment is not audited: add calls with adversarial arguments to callsOf (functions_test.go) and bound it in health/celbound/bounds.go if its work depends on its arguments' content", name)
		}
	}
	if _, err := compileRule("authorizer.path('/x').check('get').allowed()"); err == nil {
		t.Errorf("a rule reaches the authorizer library")
	}
}

// TestEveryFunctionWithinBounds is the property test of the audit: every call of
// callsOf, with arguments drawn from adversarialStrings and adversarialInts, ends within
// the CPU and memory bounds of one evaluation (the cost limit stops what would run
// over), and never panics. The short form draws 1 argument set a call, the long form 4;
// FuzzFunctionArguments searches further (make fuzz).
func TestEveryFunctionWithinBounds(t *testing.T) {
	seed := boundsSeed(t)
	r := rand.New(rand.NewPCG(seed, 23))
	strs := adversarialStrings()
	rounds := 4
	if testing.Short() {
		rounds = 1
	}
	var worstCPU time.Duration
	var worstAlloc uint64
	var worstCall, worstAllocCall string
	calls, limited := 0, 0
	for _, name := range sortedKeys(callsOf) {
		for _, call := range callsOf[name] {
			ev := mustEvaluator(t, configMapRule(expand(call), ""))
			for range rounds {
				s, u, n := strs[r.IntN(len(strs))], strs[r.IntN(len(strs))], adversarialInts[r.IntN(len(adversarialInts))]
				res, cpu, alloc := measure(ev, adversarialObject(s, u, n))
				calls++
				if cpu > worstCPU {
					worstCPU, worstCall = cpu, fmt.Sprintf("%s with S=%.40q T=%.40q N=%d", call, s, u, n)
				}
				if alloc > worstAlloc {
					worstAlloc, worstAllocCall = alloc, fmt.Sprintf("%s with S=%.40q T=%.40q N=%d", call, s, u, n)
				}
				if strings.Contains(res.Message, "cost limit exceeded") {
					limited++
				}
				if cpu > maxEvalCPU*cpuScale || alloc > maxEvalAlloc*allocScale || strings.Contains(res.Message, "internal error") {
					t.Errorf("%s with S=%.60q (%d bytes) T=%.60q (%d bytes) N=%d: %v CPU, %d MiB allocated (%v %.200q)",
						call, s, len(s), u, len(u), n, cpu, alloc>>20, res.Outcome, res.Message)
				}
			}
		}
	}
	t.Logf("%d calls: worst %v CPU (%s), %d MiB allocated (%s); %d stopped by the cost limit", calls, worstCPU, worstCall, worstAlloc>>20, worstAllocCall, limited)
}

// FuzzFunctionArguments: any string and int as arguments of any audited call end within
// a generous bound (a fuzzing machine is busy) and never panic.
func FuzzFunctionArguments(f *testing.F) {
	var all []string
	for _, name := range sortedKeys(callsOf) {
		all = append(all, callsOf[name]...)
	}
	for i, s := range adversarialStrings() {
		f.Add(uint(i), s, "a", int64(3))
	}
	evs := map[string]*health.Evaluator{}
	f.Fuzz(func(t *testing.T, which uint, s, u string, n int64) {
		call := all[which%uint(len(all))]
		ev, ok := evs[call]
		if !ok {
			ev = mustEvaluator(t, configMapRule(expand(call), ""))
			evs[call] = ev
		}
		res, cpu, alloc := measure(ev, adversarialObject(s, u, n))
		if cpu > 5*maxEvalCPU*cpuScale || alloc > 2*maxEvalAlloc*allocScale || strings.Contains(res.Message, "internal error") {
			t.Errorf("%s with S=%.60q T=%.60q N=%d: %v CPU, %d MiB allocated (%v %.200q)", call, s, u, n, cpu, alloc>>20, res.Outcome, res.Message)
		}
	})
}
