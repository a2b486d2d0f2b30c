package health

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/cel"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/celbound"
)

// matchKey indexes rules by what they match (docs/design.md, "Match"): API version and resource.
type matchKey struct {
	apiVersion string
	resource   string
}

// compiledRule is one rule, ready to run.
type compiledRule struct {
	seq        int         // position in the evaluator's order (docs/design.md, "Rule order")
	ruleSet    string      // Result.RuleSet
	index      int         // Result.RuleIndex
	rule       cel.Program // ruleExpression
	message    cel.Program // messageExpression; nil when the rule has none
	failedExpr cel.Program // failedExpression; nil when the rule has none
	generalMsg string      // message when message is nil or does not give a string
	failed     *Decider    // DecidedBy of a Fail
	errored    *Decider    // DecidedBy of an Error
	terminal   *Decider    // DecidedBy of a terminal Fail (failedExpression true)
	// apiVersionTerms are the leading terms of a wildcard rule's ruleExpression that
	// read only object.apiVersion (decide.go); nil for exact rules and for rules
	// without such terms.
	apiVersionTerms []cel.Program
}

// wildcardRule is a rule whose apiVersion is a pattern or whose resources hold "*".
type wildcardRule struct {
	rule        *compiledRule
	apiVersion  APIVersionPattern
	anyResource bool
	resources   map[string]bool
}

// matches reports whether the rule applies to key.
func (w *wildcardRule) matches(key matchKey) bool {
	return w.apiVersion.Matches(key.apiVersion) && (w.anyResource || w.resources[key.resource])
}

// maxResolved bounds the (apiVersion, resource) pairs whose matching rules an Evaluator
// remembers: far more than a cluster serves. Beyond it, a pair is matched again on every
// evaluation (a scan of the wildcard rules only), and nothing more is remembered.
const maxResolved = 4096

// Evaluator holds the compiled rules of the selected rule sets, indexed by API version
// and resource. It is safe for concurrent use and its rules never change; build a new
// one when the rule sets change (or let an EvaluatorCache do it).
//
// Rules with an exact apiVersion and resource are found by one map lookup. When some
// rules are wildcards, the rules that apply to an (apiVersion, resource) pair are
// resolved the first time the pair is evaluated and remembered (at most maxResolved
// pairs), so a steady pass costs the same lookup and nothing per wildcard rule.
type Evaluator struct {
	env      *celEnv // the rules' environment: the guard and pool of activations
	exact    map[matchKey][]*compiledRule
	wildcard []*wildcardRule // in the evaluator's order
	count    int             // rules compiled so far, the next seq

	resolved  sync.Map // matchKey → matched, only when wildcard is not empty
	nResolved atomic.Int64

	// fields is what its rules read (FieldsOf).
	fields *RuleFields
}

// Fields returns what the evaluator's rules read of the objects they match: FieldsOf
// of its rule sets.
func (e *Evaluator) Fields() *RuleFields { return e.fields }

// matched is the rules that apply to an (apiVersion, resource) pair, in the evaluator's
// order, and which of them are decided at match time (decide.go).
type matched struct {
	rules []*compiledRule
	// passes[i] says that rules[i] passes every object of the pair whose apiVersion
	// field is the pair's apiVersion; nil when no rule is decided.
	passes []bool
	// applied is the number of rules that judge such objects: len(rules) less the
	// rules decided to pass them by their apiVersion alone (decide.go).
	applied int
}

// NewEvaluator compiles every rule of the given sets once, in the order of docs/design.md,
// "Rule order": global sets sorted by name, then local sets sorted by name (then
// namespace), each set's rules in list order. The order of the arguments does not
// matter, and they are not modified. Selection is the caller's job (see
// SelectRuleSets): every set passed in is used.
//
// The first expression that does not compile fails the whole evaluator with a
// *CompileError (docs/design.md, "Assessment" step 2). Each set's expressions are
// parsed and their sizes checked before any of them is type-checked: an expression
// over MaxExpressionNodes, or one that takes its set over MaxRuleSetSquaredNodes, is
// refused first, with a *SizeError as the CompileError's Err, and so is a set that
// takes the selected HealthRuleSets together over MaxLocalSelectionSquaredNodes. Compiling
// convoy-defaults takes milliseconds: the loop reuses evaluators through an
// EvaluatorCache.
func NewEvaluator(global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet) (*Evaluator, error) {
	env, err := newEnv()
	if err != nil {
		return nil, err
	}
	e := &Evaluator{env: env, exact: map[matchKey][]*compiledRule{}, fields: FieldsOf(global, local)}

	globalOrder := sortedIndexes(len(global), func(a, b int) int {
		return cmp.Compare(global[a].Name, global[b].Name)
	})
	for _, i := range globalOrder {
		set := &global[i]
		if err := e.addSet(env, KindGlobalHealthRuleSet, "", set.Name, set.Spec.Rules); err != nil {
			return nil, err
		}
	}
	localOrder := sortedIndexes(len(local), func(a, b int) int {
		return cmp.Or(cmp.Compare(local[a].Name, local[b].Name),
			cmp.Compare(local[a].Namespace, local[b].Namespace))
	})
	if err := checkLocalSelection(env, local, localOrder); err != nil {
		return nil, err
	}
	for _, i := range localOrder {
		set := &local[i]
		if err := e.addSet(env, KindHealthRuleSet, set.Namespace, set.Name, set.Spec.Rules); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// sortedIndexes returns 0..n-1 stably sorted by cmpFn, so NewEvaluator never copies or
// reorders the caller's slices.
func sortedIndexes(n int, cmpFn func(a, b int) int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, cmpFn)
	return order
}

// addSet compiles the rules of one set and appends them to the index: it parses them
// all and checks their sizes first (parseSet), then type-checks and plans them.
func (e *Evaluator) addSet(env *celEnv, kind, namespace, name string, rules []extv1alpha1.RuleSpec) error {
	id := ruleSetID(kind, namespace, name)
	parsed, parseErr := parseSet(env, kind, namespace, name, rules)
	if parseErr != nil && errors.As(parseErr.Err, new(*SizeError)) {
		return parseErr
	}
	for i := range rules {
		if i == len(parsed) {
			return parseErr
		}
		spec := &rules[i]
		fail := func(field, expr string, err error) error {
			return &CompileError{Kind: kind, Namespace: namespace, Name: name, RuleIndex: i,
				Field: field, Expression: expr, Err: err}
		}
		rule, checked, err := check(env, parsed[i].rule)
		if err != nil {
			return fail(FieldRuleExpression, spec.RuleExpression, err)
		}
		cr := &compiledRule{seq: e.count, ruleSet: id, index: i, rule: rule, generalMsg: generalMessage(kind, name, i),
			failed:   &Decider{Kind: kind, Namespace: namespace, Name: name, Rule: i, Cause: CauseRuleFailed},
			errored:  &Decider{Kind: kind, Namespace: namespace, Name: name, Rule: i, Cause: CauseEvaluationError},
			terminal: &Decider{Kind: kind, Namespace: namespace, Name: name, Rule: i, Cause: CauseFailed}}
		if parsed[i].message != nil {
			if cr.message, _, err = check(env, parsed[i].message); err != nil {
				return fail(FieldMessageExpression, spec.MessageExpression, err)
			}
		}
		if parsed[i].failed != nil {
			if cr.failedExpr, _, err = check(env, parsed[i].failed); err != nil {
				return fail(FieldFailedExpression, spec.FailedExpression, err)
			}
		}
		e.count++
		pattern, _ := ParseAPIVersionPattern(spec.APIVersion)
		if pattern.IsWildcard() || slices.Contains(spec.Resources, Wildcard) {
			if cr.apiVersionTerms, err = apiVersionTerms(env, checked); err != nil {
				return fail(FieldRuleExpression, spec.RuleExpression, err)
			}
			w := &wildcardRule{rule: cr, apiVersion: pattern, resources: map[string]bool{}}
			for _, resource := range spec.Resources {
				w.anyResource = w.anyResource || resource == Wildcard
				w.resources[resource] = true
			}
			e.wildcard = append(e.wildcard, w)
			continue
		}
		seen := map[string]bool{}
		for _, resource := range spec.Resources {
			if seen[resource] {
				continue // listed twice: evaluate the rule once
			}
			seen[resource] = true
			key := matchKey{apiVersion: spec.APIVersion, resource: resource}
			e.exact[key] = append(e.exact[key], cr)
		}
	}
	return nil
}

// rulesFor returns the rules that apply to an (apiVersion, resource) pair, in the
// evaluator's order. The result is shared and must not be modified.
func (e *Evaluator) rulesFor(key matchKey) matched {
	if len(e.wildcard) == 0 {
		rules := e.exact[key]
		return matched{rules: rules, applied: len(rules)}
	}
	if v, ok := e.resolved.Load(key); ok {
		return v.(matched)
	}
	m := e.resolve(key)
	if e.nResolved.Load() < maxResolved {
		if _, loaded := e.resolved.LoadOrStore(key, m); !loaded {
			e.nResolved.Add(1)
		}
	}
	return m
}

// resolve merges the exact rules of key with the wildcard rules that match it, both
// already in the evaluator's order, and decides the wildcard rules that its apiVersion
// lets through (decide.go).
func (e *Evaluator) resolve(key matchKey) matched {
	exact := e.exact[key]
	var m matched
	var decided []int // indexes in m.rules of the wildcard rules decided to pass
	for _, w := range e.wildcard {
		if !w.matches(key) {
			continue
		}
		for len(exact) > 0 && exact[0].seq < w.rule.seq {
			m.rules, exact = append(m.rules, exact[0]), exact[1:]
		}
		if w.rule.passesAll(e.env, key.apiVersion) {
			decided = append(decided, len(m.rules))
		}
		m.rules = append(m.rules, w.rule)
	}
	if m.rules == nil {
		return matched{rules: exact, applied: len(exact)} // no wildcard applies: share the exact list
	}
	m.rules = append(m.rules, exact...)
	m.applied = len(m.rules) - len(decided)
	if len(decided) > 0 {
		m.passes = make([]bool, len(m.rules))
		for _, i := range decided {
			m.passes[i] = true
		}
	}
	return m
}

// RulesApplied returns the number of rules that judge objects of an apiVersion
// ("apps/v1", or "v1" for the core group) and a plural lowercase resource: the rules
// whose apiVersion (or apiVersion pattern) and resources (or "*") match, less the
// wildcard rules that pass every such object by its apiVersion alone without reading
// it (decide.go: the generic set's rule on built-in kinds). 0 means that no selected
// rule judges such objects.
func (e *Evaluator) RulesApplied(apiVersion, resource string) int {
	return e.rulesFor(matchKey{apiVersion: apiVersion, resource: resource}).applied
}

// emptyObject stands for a nil object; it is never modified.
var emptyObject = map[string]any{}

// Evaluate runs the rules that apply to one live object (docs/design.md,
// "Match", "Result", "Rule order" and "Messages").
//
// apiVersion is the object's group/version ("apps/v1", or "v1" for the core group) and
// resource its plural lowercase resource ("deployments"). A rule applies when its
// apiVersion equals apiVersion or is a pattern that matches it (APIVersionPattern: "*",
// "GROUP/*", "*/VERSION", "*.SUFFIX/VERSION", "*.SUFFIX/*") and one of its resources
// equals resource or is "*"; the kind is never matched. Result.RulesApplied counts the
// rules that apply, less those that pass the object by its apiVersion alone (see
// RulesApplied). object is the
// content as the dynamic client returns it (unstructured.Unstructured.Object: nested
// map[string]any and []any, integers as int64); a nil object is evaluated as {}. It is
// only read.
//
// The applicable rules run in the evaluator's order; the first one that errors gives
// Error, the first one that returns false gives Fail, and Pass needs all of them to
// return true (or none to apply). Once a rule has returned false, the rules after it run
// only when they have a failedExpression, to find a terminal failure: the first rule
// whose ruleExpression returns false and whose failedExpression returns true decides (a
// terminal Fail, Result.Terminal, with its message); an error in a failedExpression is
// an Error; without a terminal failure the first Fail decides. Each expression runs within celbound.CostLimit; one
// that would exceed it is an Error "evaluation error: operation cancelled: actual cost
// limit exceeded". A panic inside an evaluation is an Error too, never a crash.
func (e *Evaluator) Evaluate(apiVersion, resource string, object map[string]any) Result {
	r, _, _ := e.evaluate(nil, nil, apiVersion, resource, object) //nolint:staticcheck // SA1012: nil is "no cancellation", the hot path
	return r
}

// EvaluateContext is Evaluate for a caller with a deadline or a cancellation, such as a
// request that explains entries or a command line that got SIGTERM: once ctx is done it
// stops and returns ctx.Err() and no Result. It stops in the middle of an expression,
// too: every 64 comprehension iterations, charged calls or runes a regular expression
// reads, the evaluation looks at ctx, so it ends within about a millisecond of ctx
// whatever the rules do. A rule set can hold many expressions that each pass just within
// celbound.CostLimit, so without a deadline one object can take seconds.
func (e *Evaluator) EvaluateContext(ctx context.Context, apiVersion, resource string, object map[string]any) (Result, error) {
	r, _, err := e.evaluate(ctx, nil, apiVersion, resource, object)
	return r, err
}

// evaluate is Evaluate, stopped once ctx (when not nil) is done, and charging m (when
// not nil; metered.go) with the cost of every expression. It also returns the cost units
// it charged to m.
func (e *Evaluator) evaluate(ctx context.Context, m *celbound.Meter, apiVersion, resource string, object map[string]any) (Result, uint64, error) {
	match := e.rulesFor(matchKey{apiVersion: apiVersion, resource: resource})
	if len(match.rules) == 0 {
		return passedResult(0), 0, nil
	}
	act := e.env.activations.Get().(*celbound.Activation)
	act.Reset(m)
	defer func() {
		act.Reset(nil) // the pool keeps neither the object nor the Meter
		e.env.activations.Put(act)
	}()
	r, err := e.evaluateRules(ctx, m, act, match, apiVersion, object)
	return r, act.Spent(), err
}
