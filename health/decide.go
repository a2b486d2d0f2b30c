package health

import (
	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// Wildcard rules decided at match time.
//
// A wildcard rule meets objects of many apiVersions, and often begins by letting some of
// them through: the generic set's rule starts with
// `!dyn(object).apiVersion.contains('.') || dyn(object).apiVersion.contains('.k8s.io/') || ...`
// so that every built-in kind passes it at once. Such a leading test reads nothing of the
// object but its apiVersion, so its value is the same for every object of one
// apiVersion: the evaluator computes it once, when it resolves the rules of an
// (apiVersion, resource) pair, instead of on every object.
//
// The rule: a wildcard rule's ruleExpression is read as a chain of `||` (parentheses do
// not matter), in the order CEL evaluates it, left to right. Its leading terms that read
// object only as object.apiVersion (also written dyn(object).apiVersion,
// object.?apiVersion or has(object.apiVersion)) and contain no comprehension are the
// apiVersion terms. When the rules of a pair are resolved, the apiVersion terms run in
// order on an object that holds only that apiVersion: the first one that returns true
// decides that the rule passes every object of the pair whose apiVersion field is that
// apiVersion; one that returns false leaves the decision to the next; anything else (an
// error, a non-bool) leaves the rule undecided. An object whose apiVersion field is not
// the pair's (or is absent) is always evaluated in full.
//
// The verdict is the one a full evaluation gives: CEL evaluates `a || b` from the left
// and stops at the first true term, so the full evaluation of such an object stops at
// the same term with the same value. A decided rule costs nothing (no CEL evaluation,
// nothing charged to a Meter), and it does not count in Result.RulesApplied or
// Evaluator.RulesApplied: it let the object through without reading it, so it did not
// judge it (the generic set on a ConfigMap counts 0). An object whose apiVersion field is
// not the pair's is evaluated by every rule, and every rule counts.

// apiVersionTerms returns the leading apiVersion terms of a checked ruleExpression,
// planned as programs of their own; nil when it has none.
func apiVersionTerms(env *celEnv, checked *celast.AST) ([]cel.Program, error) {
	var terms []celast.Expr
	flattenOr(checked.Expr(), &terms)
	if len(terms) < 2 {
		return nil, nil // a whole expression that reads only the apiVersion: nothing to gain
	}
	var progs []cel.Program
	for _, t := range terms {
		if !readsOnlyAPIVersion(t) {
			break
		}
		sub := celast.NewCheckedAST(celast.NewAST(t, checked.SourceInfo()), checked.TypeMap(), checked.ReferenceMap())
		prg, err := env.guard.Plan(sub)
		if err != nil {
			return nil, err
		}
		progs = append(progs, prg)
	}
	return progs, nil
}

// flattenOr appends the terms of a chain of `||` to terms, from left to right.
func flattenOr(e celast.Expr, terms *[]celast.Expr) {
	if e.Kind() == celast.CallKind {
		call := e.AsCall()
		if call.FunctionName() == operators.LogicalOr && !call.IsMemberFunction() && len(call.Args()) == 2 {
			flattenOr(call.Args()[0], terms)
			flattenOr(call.Args()[1], terms)
			return
		}
	}
	*terms = append(*terms, e)
}

// readsOnlyAPIVersion reports whether e reads object only through its apiVersion field
// and has no comprehension (whose variables could hide object).
func readsOnlyAPIVersion(e celast.Expr) bool {
	switch e.Kind() {
	case celast.LiteralKind:
		return true
	case celast.IdentKind:
		return e.AsIdent() != objectVariable // a type name such as string; object itself is read whole
	case celast.SelectKind:
		sel := e.AsSelect()
		if sel.FieldName() == "apiVersion" && isObject(sel.Operand()) {
			return true
		}
		return readsOnlyAPIVersion(sel.Operand())
	case celast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if call.FunctionName() == operators.OptSelect && len(args) == 2 && isObject(args[0]) &&
			args[1].Kind() == celast.LiteralKind && args[1].AsLiteral() == types.String("apiVersion") {
			return true
		}
		if call.IsMemberFunction() && !readsOnlyAPIVersion(call.Target()) {
			return false
		}
		for _, a := range args {
			if !readsOnlyAPIVersion(a) {
				return false
			}
		}
		return true
	case celast.ListKind:
		for _, el := range e.AsList().Elements() {
			if !readsOnlyAPIVersion(el) {
				return false
			}
		}
		return true
	case celast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			if !readsOnlyAPIVersion(me.Key()) || !readsOnlyAPIVersion(me.Value()) {
				return false
			}
		}
		return true
	case celast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			if !readsOnlyAPIVersion(f.AsStructField().Value()) {
				return false
			}
		}
		return true
	}
	return false // comprehensions, and anything unknown
}

// isObject reports whether e is object or dyn(object).
func isObject(e celast.Expr) bool {
	switch e.Kind() {
	case celast.IdentKind:
		return e.AsIdent() == objectVariable
	case celast.CallKind:
		call := e.AsCall()
		return call.FunctionName() == "dyn" && !call.IsMemberFunction() && len(call.Args()) == 1 &&
			call.Args()[0].Kind() == celast.IdentKind && call.Args()[0].AsIdent() == objectVariable
	}
	return false
}

// passesAll reports whether the rule's apiVersion terms decide that it passes every
// object whose apiVersion field is apiVersion (see above).
func (r *compiledRule) passesAll(env *celEnv, apiVersion string) bool {
	if len(r.apiVersionTerms) == 0 {
		return false
	}
	act := env.guard.NewActivation()
	act.Bind(map[string]any{"apiVersion": apiVersion})
	for _, p := range r.apiVersionTerms {
		out, err := act.Eval(nil, p) //nolint:staticcheck // SA1012: nil is "no cancellation", the hot path (celbound.Activation.Eval)
		if err != nil || out != types.False {
			return err == nil && out == types.True
		}
	}
	return false
}
