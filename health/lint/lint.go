// Package lint checks health rule sets beyond what the loop needs to run them
// (convoyctl health lint): every rule compiles as NewEvaluator compiles it, has what
// admission requires, and is type-checked against the schema of the resources it
// matches, where a SchemaSource knows one:
//
//   - a field that does not exist (object.status.readyReplica on a Deployment); an
//     optional selection (object.?status) or has() of such a field works (none, false) and
//     is a Warning only when no resource the rule is checked against declares the field
//     (optional.go),
//   - an operation on mismatched types (object.spec.replicas == 'three'),
//   - has() on a field whose parent may be absent and is not guarded by an earlier
//     has() of that parent (has(object.status.x.y) when status.x is optional),
//   - a rule whose apiVersion and resource match nothing the source knows, and, whatever
//     the pattern, an apiVersion or resource that no API server can serve (names.go).
//
// The check compiles each expression in the rules' CEL environment (Kubernetes' base
// environment at health.CompatibilityVersion) with object declared as the resource's
// type, as the API server type-checks CRD validation rules and ValidatingAdmissionPolicy
// expressions; formats are dropped so that date-times and quantities stay the strings
// that the loop's unstructured objects hold. The package reads no cluster: the caller
// passes the SchemaSource (Builtin offline, CRDs built from CustomResourceDefinition
// manifests, one backed by a cluster's /openapi/v3, or Sources chaining them).
//
//	findings := lint.Lint(global, local, &lint.Builtin{})
//	for _, f := range findings { fmt.Println(f) }
package lint

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// Resolution says what a SchemaSource knows of a group-version-resource.
type Resolution int

const (
	// Found: the schema is known.
	Found Resolution = iota
	// UnknownResource: the source knows the group (or the cluster), and it has no such
	// version or resource: the rule can never apply.
	UnknownResource
	// NoSchema: the source knows nothing of the group (a CRD, offline); the rule is not
	// type-checked.
	NoSchema
)

// SchemaSource finds the schema of the objects of a resource.
type SchemaSource interface {
	// Lookup returns the schema of gv/resource (OpenAPI, $refs resolved) and its kind
	// when Found. An error means the source could not tell (for example the cluster did
	// not answer); the rule is then not type-checked and the error is a note.
	Lookup(gv schema.GroupVersion, resource string) (*spec.Schema, schema.GroupVersionKind, Resolution, error)
}

// Severity of a finding.
type Severity string

const (
	// Error findings make convoyctl health lint exit 1.
	Error Severity = "error"
	// Warning findings name what works but never reads anything (an optional selection
	// of a field that no schema the rule is checked against declares); they do not fail
	// the lint.
	Warning Severity = "warning"
	// Note findings say what was not checked; they do not fail the lint.
	Note Severity = "note"
)

// Finding is one problem of one rule.
type Finding struct {
	Severity Severity
	// RuleSet is "GlobalHealthRuleSet/<name>" or "HealthRuleSet/<namespace>/<name>".
	RuleSet string
	// Rule is the 0-based index of the rule in spec.rules.
	Rule int
	// Field is ruleExpression, messageExpression, apiVersion or resources.
	Field string
	// Message says what is wrong.
	Message string
}

// String is "<severity>: <RuleSet> rule <i> <field>: <message>".
func (f Finding) String() string {
	return fmt.Sprintf("%s: %s rule %d %s: %s", f.Severity, f.RuleSet, f.Rule, f.Field, f.Message)
}

// Lint checks every rule of the given sets (see the package doc) and returns the
// findings in rule order: sets as given, rules in list order.
func Lint(global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet, src SchemaSource) []Finding {
	var out []Finding
	for i := range global {
		s := &global[i]
		out = append(out, lintSet(health.KindGlobalHealthRuleSet, "", s.Name, s.Spec.Rules, src)...)
	}
	for i := range local {
		s := &local[i]
		out = append(out, lintSet(health.KindHealthRuleSet, s.Namespace, s.Name, s.Spec.Rules, src)...)
	}
	return out
}

// HasErrors reports whether any finding is an Error.
func HasErrors(findings []Finding) bool {
	for _, f := range findings {
		if f.Severity == Error {
			return true
		}
	}
	return false
}

func lintSet(kind, namespace, name string, rules []extv1alpha1.RuleSpec, src SchemaSource) []Finding {
	id := kind + "/" + name
	if namespace != "" {
		id = kind + "/" + namespace + "/" + name
	}
	var out []Finding
	// The loop compiles a set as a whole: beyond each expression's size (checked with
	// each rule below), the sizes of the set's expressions are bounded together.
	var setTooLarge *Finding
	var ce *health.CompileError
	var se *health.SizeError
	if err := health.CheckRuleSetSize(kind, namespace, name, rules); errors.As(err, &ce) && errors.As(err, &se) && se.RuleSet {
		setTooLarge = &Finding{Severity: Error, RuleSet: id, Rule: ce.RuleIndex, Field: ce.Field, Message: "does not compile: " + se.Error()}
	}
	for i := range rules {
		r := &rules[i]
		if setTooLarge != nil && setTooLarge.Rule == i {
			out = append(out, *setTooLarge)
		}
		var add addFunc = func(sev Severity, field, format string, args ...any) {
			out = append(out, Finding{Severity: sev, RuleSet: id, Rule: i, Field: field, Message: fmt.Sprintf(format, args...)})
		}
		// Admission: the CRD's required fields.
		if r.APIVersion == "" {
			add(Error, "apiVersion", "required")
		}
		if len(r.Resources) == 0 {
			add(Error, "resources", "required")
		}
		if r.RuleExpression == "" {
			add(Error, health.FieldRuleExpression, "required")
		}
		// The loop: the rule alone must compile as NewEvaluator compiles it.
		one := extv1alpha1.GlobalHealthRuleSet{}
		one.Name = name
		one.Spec.Rules = []extv1alpha1.RuleSpec{*r}
		if _, err := health.NewEvaluator([]extv1alpha1.GlobalHealthRuleSet{one}, nil); err != nil {
			var ce *health.CompileError
			if errors.As(err, &ce) {
				add(Error, ce.Field, "does not compile: %v", ce.Err)
			} else {
				add(Error, health.FieldRuleExpression, "does not compile: %v", err)
			}
			continue
		}
		pattern, misplaced := health.ParseAPIVersionPattern(r.APIVersion)
		if misplaced {
			add(Error, "apiVersion", "%q matches nothing: a \"*\" stands for a whole apiVersion (\"*\"), a whole version (\"GROUP/*\"), "+
				"a whole group (\"*/VERSION\") or the start of a group (\"*.SUFFIX/VERSION\", \"*.SUFFIX/*\")", r.APIVersion)
			continue
		}
		for _, res := range r.Resources {
			if res != health.Wildcard && strings.Contains(res, health.Wildcard) {
				add(Error, "resources", "%q matches nothing: \"*\" stands alone for every resource", res)
			}
		}
		apiVersionOK, resources := checkTarget(r, add)
		if !apiVersionOK || len(resources) == 0 {
			continue
		}
		valid := *r
		valid.Resources = resources
		r = &valid
		if pattern.IsWildcard() || slices.Contains(r.Resources, health.Wildcard) {
			lintWildcard(r, src, add)
			continue
		}
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			add(Error, "apiVersion", "%q is not a group/version: %v", r.APIVersion, err)
			continue
		}
		var tally undeclaredTally
		for _, res := range r.Resources {
			if strings.Contains(res, health.Wildcard) {
				continue
			}
			s, gvk, resolution, err := src.Lookup(gv, res)
			switch {
			case err != nil:
				add(Note, "resources", "%s %s not type-checked: %v", r.APIVersion, res, err)
				continue
			case resolution == UnknownResource:
				switch sev, why := knownTarget(parseTarget(r.APIVersion), res, src, enumerate(src)); sev {
				case Note:
					add(Note, "resources", "%s %s: %s", r.APIVersion, res, why)
				case Error:
					add(Error, "resources", "%s %s matches nothing known: %s", r.APIVersion, res, why)
				default:
					add(Error, "resources", "%s %s matches nothing known: no such version or resource (plural, lowercase)", r.APIVersion, res)
				}
				continue
			case resolution == NoSchema:
				add(Note, "resources", "%s %s not type-checked: no schema known (give its CustomResourceDefinition with --schema, or --kubeconfig to read the cluster's)", r.APIVersion, res)
				continue
			}
			checkRule(r, r.APIVersion, res, s, gvk, add, &tally)
		}
		tally.warn(add)
	}
	return out
}

// checkRule type-checks the expressions of r against the schema s of apiVersion/res:
// errors are added, the selections of undeclared fields are tallied.
func checkRule(r *extv1alpha1.RuleSpec, apiVersion, res string, s *spec.Schema, gvk schema.GroupVersionKind, add addFunc, tally *undeclaredTally) {
	resource := fmt.Sprintf("%s %s (%s)", apiVersion, res, gvk.Kind)
	tally.checked = append(tally.checked, resource)
	for _, e := range []struct{ field, expr string }{
		{health.FieldRuleExpression, r.RuleExpression}, {health.FieldMessageExpression, r.MessageExpression},
		{health.FieldFailedExpression, r.FailedExpression},
	} {
		if e.expr == "" {
			continue
		}
		errs, uses := checkExpression(e.expr, s, gvk)
		for _, msg := range errs {
			add(Error, e.field, "%s: %s", resource, msg)
		}
		for _, u := range uses {
			tally.add(e.field, resource, u)
		}
	}
}

// undeclaredTally collects, over the resources a rule is type-checked against, the
// optional selections and has() of fields that their schemas do not declare.
type undeclaredTally struct {
	// checked lists the resources type-checked, as "apiVersion resource (Kind)".
	checked []string
	uses    map[useKey]*tallied
	order   []useKey
}

// useKey identifies a selection: the expression's field and the node's ID.
type useKey struct {
	field string
	id    int64
}

// tallied is a selection and the resources whose schema lacks its field.
type tallied struct {
	first undeclaredUse
	in    []string
}

func (t *undeclaredTally) add(field, resource string, u undeclaredUse) {
	k := useKey{field, u.id}
	if t.uses == nil {
		t.uses = map[useKey]*tallied{}
	}
	if t.uses[k] == nil {
		t.uses[k] = &tallied{first: u}
		t.order = append(t.order, k)
	}
	t.uses[k].in = append(t.uses[k].in, resource)
}

// warn adds a warning for each selection whose field no resource checked declares: it
// yields none (has(): false) wherever the rule applies, which is a misspelt field or a
// rule for other kinds. A field that only some of them lack is what a rule for several
// kinds reads on purpose, and is not reported.
func (t *undeclaredTally) warn(add addFunc) {
	for _, k := range t.order {
		u := t.uses[k]
		if len(u.in) != len(t.checked) {
			continue
		}
		if len(t.checked) == 1 {
			add(Warning, k.field, "%s: %s", t.checked[0], u.first)
			continue
		}
		add(Warning, k.field, "%s: %s (column %d): none of them declares field '%s': %s",
			listed(t.checked), u.first.text, u.first.column, u.first.field, u.first.outcome())
	}
}

// listed joins at most maxListed items, and says how many more there are.
func listed(items []string) string {
	list := strings.Join(items[:min(len(items), maxListed)], ", ")
	if len(items) > maxListed {
		list += fmt.Sprintf(" and %d more", len(items)-maxListed)
	}
	return list
}

// addFunc records a finding of the rule being linted.
type addFunc func(sev Severity, field, format string, args ...any)
