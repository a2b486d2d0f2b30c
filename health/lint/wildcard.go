package lint

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// Enumerator is a SchemaSource that can list the resources it knows, so that a wildcard
// rule is type-checked against each of them that it matches.
type Enumerator interface {
	// Resources lists every group-version-resource the source may find a schema of.
	Resources() []schema.GroupVersionResource
}

// maxListed bounds the resources a note about a wildcard rule names.
const maxListed = 8

// lintWildcard type-checks a wildcard rule (an apiVersion pattern, or resources holding
// "*") against every resource that src lists and the rule matches, and says in a note
// that the resources no source knows, which the rule may meet on a cluster, are not
// type-checked: a wildcard is never skipped silently.
//
// A resource (or "*") that matches none of them is an error when the apiVersion names its
// group exactly and the sources know that group and none of its versions the rule
// matches has the resource (knownTarget), as for an exact apiVersion; otherwise a note
// says when the plural of a resource's name is known (pluralHint).
func lintWildcard(r *extv1alpha1.RuleSpec, src SchemaSource, add addFunc) {
	all := enumerate(src)
	var known []schema.GroupVersionResource
	for _, gvr := range all {
		if health.RuleMatches(r.APIVersion, r.Resources, gvr.GroupVersion().String(), gvr.Resource) {
			known = append(known, gvr)
		}
	}
	t := parseTarget(r.APIVersion)
	unknown := false
	for _, res := range r.Resources {
		if slices.ContainsFunc(known, func(gvr schema.GroupVersionResource) bool { return res == health.Wildcard || gvr.Resource == res }) {
			continue
		}
		if sev, why := knownTarget(t, res, src, all); sev == Error {
			add(Error, "resources", "%s %s matches nothing known: %s", r.APIVersion, res, why)
			unknown = true
		} else if sev == Note {
			add(Note, "resources", "%s %s: %s", r.APIVersion, res, why)
		} else if hint := pluralHint(t, res, all); hint != "" {
			add(Note, "resources", "%s %s: no resource that the schema sources know of an apiVersion matching %s is named %s, but %s is: resources are plural, lowercase",
				r.APIVersion, res, r.APIVersion, res, hint)
		}
	}
	var checked []string
	var tally undeclaredTally
	for _, gvr := range known {
		s, gvk, resolution, err := src.Lookup(gvr.GroupVersion(), gvr.Resource)
		if err != nil || resolution != Found {
			continue
		}
		checkRule(r, gvr.GroupVersion().String(), gvr.Resource, s, gvk, add, &tally)
		checked = append(checked, gvr.GroupVersion().String()+" "+gvr.Resource)
	}
	tally.warn(add)
	what := fmt.Sprintf("%s %s", r.APIVersion, strings.Join(r.Resources, ","))
	if len(checked) == 0 {
		if unknown {
			return // an error said that it matches nothing
		}
		add(Note, "resources", "%s not type-checked: a wildcard, and no schema known matches it (give the CustomResourceDefinitions it is for with --schema, or --kubeconfig to read the cluster's)", what)
		return
	}
	list := listed(checked)
	add(Note, "resources", "%s is a wildcard: type-checked against the %d known resources it matches (%s); resources it meets that no schema source knows are not type-checked", what, len(checked), list)
}

// Resources lists the resources of the built-in kinds, sorted.
func (b *Builtin) Resources() []schema.GroupVersionResource {
	b.init()
	return sortedGVRs(maps.Keys(b.kinds))
}

// Resources lists the served versions of the CRDs' resources, sorted.
func (c *CRDs) Resources() []schema.GroupVersionResource {
	return sortedGVRs(maps.Keys(c.schemas))
}

// Resources lists what every source that can list knows, sorted, each once.
func (ss Sources) Resources() []schema.GroupVersionResource {
	seen := map[schema.GroupVersionResource]bool{}
	for _, s := range ss {
		if en, ok := s.(Enumerator); ok {
			for _, gvr := range en.Resources() {
				seen[gvr] = true
			}
		}
	}
	return sortedGVRs(maps.Keys(seen))
}

func sortedGVRs(keys iter.Seq[schema.GroupVersionResource]) []schema.GroupVersionResource {
	return slices.SortedFunc(keys, func(a, b schema.GroupVersionResource) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Resource, b.Resource))
	})
}
