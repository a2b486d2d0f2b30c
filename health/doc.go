// Package health evaluates the CEL health rules of GlobalHealthRuleSets and
// HealthRuleSets against live Kubernetes objects and turns the verdict into a health
// state (docs/design.md, "Rules" and "Per-entry evaluation").
//
// The package is pure: it holds no client and reads no wall clock (only the thread CPU
// clock that meters an evaluation, celbound.Meter). The health loop lists the
// rule sets and reads the objects, and passes the time of its pass in, so every step here
// can be tested with plain values and the convoyctl command line gives the same answers
// as the loop.
//
// A pass of the loop over one Release uses it like this:
//
//	global, local, err := health.SelectRuleSets(allGlobal, allLocal,
//		ha.GlobalRuleSetSelector, ha.LocalRuleSetSelector, release.Namespace)
//	if err != nil { ... }                    // invalid selector
//	ev, err := cache.Get(global, local)      // a *health.EvaluatorCache held by the loop
//	if err != nil { ... }                    // *health.CompileError: stop assessing this Release
//	for _, entry := range inventory.Entries {
//		obj := read(entry)                   // unstructured.Unstructured from the dynamic client
//		r := ev.Evaluate(entry.APIVersion(), entry.Resource, obj.Object)
//		state, anchor := health.DeriveState(r, firstUnhealthy(entry), deadline, now)
//		// write state, r.Message and anchor (firstUnhealthy) to the entry
//	}
//
// Why it is shaped this way:
//
//   - NewEvaluator compiles every expression once per set of rule sets, and fails as a
//     whole on the first bad expression: a Release is never assessed with half its rules.
//     Rules are indexed by apiVersion and resource, so Evaluate runs only the rules that
//     apply to an object. Compiling takes milliseconds, so the loop keeps evaluators in an
//     EvaluatorCache keyed by the selected sets' identities and generations: a steady
//     pass compiles nothing. Type-checking costs grow with the square of an expression's
//     size, so every expression is parsed and its size checked before anything of its set
//     is type-checked (MaxExpressionNodes, MaxRuleSetSquaredNodes).
//   - The order of rules is fixed (docs/design.md, "Rule order": GlobalHealthRuleSets by name,
//     then HealthRuleSets by name, each set's rules in list order) and NewEvaluator sorts
//     on its own, so the deciding rule and its message never depend on list order.
//   - The CEL environment is Kubernetes' own: k8s.io/apiserver/pkg/cel/environment's base
//     environment at a pinned CompatibilityVersion, extended with one dyn variable,
//     object, so rules read like CRD validation rules and the libraries follow Kubernetes
//     releases.
//   - No rule can hurt the process. Each evaluation of one expression has a budget
//     (celbound.CostLimit, the API server's per-call limit, about 0.1 s of CPU). The
//     bound of package celbound, installed on every program, charges every library call
//     from its arguments before it runs (their sizes, and their content where the work
//     depends on it: docs/rules.md), so a call whose work or result outgrows its inputs
//     (replace, join, split, format, indexOf, regex, list and set functions, parsers) is
//     stopped before it starts, and charges every step of every comprehension
//     iteration. A rule that would exceed the budget is an evaluation error ending in
//     "cost limit exceeded" (Unknown), and a panic inside an evaluation is one too.
//   - CEL's && and || let a decisive operand absorb an error in another, so
//     `has(object.status) && object.status.x == 1` fails cleanly on an object without
//     status; an error that nothing absorbs is an evaluation error, which is Unknown,
//     not a failure.
//   - Objects must reach Evaluate as the dynamic client returns them, integers as int64:
//     CEL keeps int and double apart. Package manifest decodes files that way.
package health
