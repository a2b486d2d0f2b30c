package lint

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// A rule matches an object by its apiVersion and plural resource name, compared as
// strings (health.RuleMatches): a value that no API server can serve matches nothing,
// whatever the pattern, and the loop accepts it silently (admission checks only that
// the fields are set). checkTarget reports such values; knownTarget reports the
// well-formed names that the schema sources know do not exist.

// checkTarget checks the form of the rule's apiVersion and resources. It returns
// whether the apiVersion is well-formed, and the resources that are ("*" included;
// a resource with a misplaced "*" is reported by the caller and left out).
func checkTarget(r *extv1alpha1.RuleSpec, add addFunc) (apiVersionOK bool, resources []string) {
	apiVersionOK = checkAPIVersion(r.APIVersion, add)
	for _, res := range r.Resources {
		if res == health.Wildcard {
			resources = append(resources, res)
			continue
		}
		if strings.Contains(res, health.Wildcard) {
			continue // "matches nothing", said by the caller
		}
		if msg := resourceNameProblem(res); msg != "" {
			add(Error, "resources", "%s", msg)
			continue
		}
		resources = append(resources, res)
	}
	return apiVersionOK, resources
}

// checkAPIVersion reports an apiVersion that is not "*", "VERSION" or "GROUP/VERSION"
// with GROUP a lowercase DNS subdomain (or "*", or "*.SUFFIX" with SUFFIX one) and VERSION
// a DNS-1035 label (or "*"). A misplaced "*" is reported before, by the caller.
func checkAPIVersion(apiVersion string, add addFunc) bool {
	if apiVersion == health.Wildcard {
		return true
	}
	bad := func(format string, args ...any) bool {
		add(Error, "apiVersion", "%q"+format, append([]any{apiVersion}, args...)...)
		return false
	}
	group, version, slash := strings.Cut(apiVersion, "/")
	if !slash {
		group, version = "", apiVersion
	}
	switch {
	case strings.Contains(version, "/"):
		return bad(` holds more than one "/": an apiVersion is GROUP/VERSION, such as apps/v1`)
	case slash && group == "" && version == "":
		return bad(` is not an apiVersion: it has no group and no version; write GROUP/VERSION (apps/v1), the version alone for the core group (v1), or a pattern such as "apps/*" or "*"`)
	case slash && group == "":
		return bad(`: no group before the "/": the core group's apiVersion is the version alone, such as v1`)
	case slash && version == "":
		return bad(`: no version after the "/": write GROUP/VERSION such as apps/v1, or GROUP/* for every version of GROUP`)
	case group == "core":
		return bad(`: the core group has no name: its apiVersion is the version alone, such as v1 (Pods, Services, ConfigMaps)`)
	}
	switch {
	case group == "" || group == health.Wildcard:
	case strings.HasPrefix(group, "*."):
		if suffix := group[2:]; len(validation.IsDNS1123Subdomain(suffix)) > 0 {
			return bad(`: %q after "*." is not a DNS subdomain: "*.SUFFIX" matches the groups that end in .SUFFIX, with SUFFIX a lowercase DNS subdomain such as k8s.io`, suffix)
		}
	default:
		if len(validation.IsDNS1123Subdomain(group)) > 0 {
			return bad(`: group %q is not an API group name: groups are lowercase DNS subdomains (letters, digits, '-' and '.'), such as apps or cert-manager.io`, group)
		}
	}
	if version != health.Wildcard && len(validation.IsDNS1035Label(version)) > 0 {
		return bad(`: version %q is not an API version: versions are lowercase DNS-1035 labels such as v1 or v1beta1`, version)
	}
	return true
}

// resourceNameProblem says why res cannot name a resource, "" when it can: a resource is
// a DNS-1123 label (Kubernetes' plural names are lowercase letters).
func resourceNameProblem(res string) string {
	if len(validation.IsDNS1123Label(res)) == 0 {
		return ""
	}
	if name, sub, ok := strings.Cut(res, "/"); ok && sub != "" && len(validation.IsDNS1123Label(name)) == 0 {
		return fmt.Sprintf("%q is a subresource: a rule applies to objects, name their resource alone (%s)", res, name)
	}
	if first := []rune(res); len(first) > 0 && unicode.IsUpper(first[0]) && strings.ToUpper(res) != res &&
		len(validation.IsDNS1123Label(strings.ToLower(res))) == 0 {
		return fmt.Sprintf("%q is a kind, not a resource: resources name plural lowercase resources, such as %s for %s", res, pluralOf(res), res)
	}
	return fmt.Sprintf("%q is not a resource name: resources are plural, lowercase names (letters, digits and '-'), such as deployments, or \"*\" for every resource", res)
}

// pluralOf guesses the resource of a kind, or the plural of a singular resource name,
// as the API server names built-in resources.
func pluralOf(name string) string {
	gvr, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Kind: name})
	return gvr.Resource
}

// target is a well-formed rule apiVersion, split: group is "" for the core group,
// exactGroup false for "*" and "*.SUFFIX", exactVersion false for "*".
type target struct {
	apiVersion   string
	pattern      health.APIVersionPattern
	group        string
	exactGroup   bool
	version      string
	exactVersion bool
}

func parseTarget(apiVersion string) target {
	t := target{apiVersion: apiVersion}
	t.pattern, _ = health.ParseAPIVersionPattern(apiVersion)
	if apiVersion == health.Wildcard {
		return t
	}
	group, version, slash := strings.Cut(apiVersion, "/")
	if !slash {
		group, version = "", apiVersion
	}
	t.group, t.version = group, version
	t.exactGroup = group != health.Wildcard && !strings.HasPrefix(group, "*.")
	t.exactVersion = version != health.Wildcard
	return t
}

// knownTarget explains why the sources resolve none of a rule's resources under t, from
// what they list (known: every group-version-resource the sources enumerate), when the
// group is exact and the sources know it, and every Lookup of res ("*": any resource of
// the group) at the versions t matches is UnknownResource:
//
//   - an Error message (after "matches nothing known: ") naming the versions or
//     resources the group has;
//   - a Note message when res is the plural that tools derive from the kind of a known
//     resource whose real plural differs (dnssdserviceinstances for DNSSDServiceInstance,
//     served as dnssd-service-instances): no object on a cluster has it, but convoyctl
//     health eval --guess-resources gives it, so a rule may list it next to the real one.
//
// It returns "" when it cannot tell.
func knownTarget(t target, res string, src SchemaSource, known []schema.GroupVersionResource) (Severity, string) {
	if !t.exactGroup {
		return "", ""
	}
	var versions, ofGroup, atVersion []string
	for _, gvr := range known {
		if gvr.Group != t.group {
			continue
		}
		versions = appendOnce(versions, gvr.Version)
		ofGroup = appendOnce(ofGroup, gvr.Resource)
		if !t.exactVersion || gvr.Version == t.version {
			atVersion = appendOnce(atVersion, gvr.Resource)
		}
	}
	if len(versions) == 0 {
		return "", "" // the sources list nothing of the group
	}
	tryVersions := versions
	if t.exactVersion {
		tryVersions = []string{t.version}
	}
	tryResources := []string{res}
	if res == health.Wildcard {
		tryResources = ofGroup
	}
	for _, v := range tryVersions {
		for _, r := range tryResources {
			_, _, resolution, err := src.Lookup(schema.GroupVersion{Group: t.group, Version: v}, r)
			if err != nil || resolution != UnknownResource {
				return "", "" // served, or a source that cannot tell
			}
		}
	}
	group := t.group
	if group == "" {
		group = "core"
	}
	if t.exactVersion && !slices.Contains(versions, t.version) {
		return Error, fmt.Sprintf("group %s has no version %s (it has %s)", group, t.version, listed(sorted(versions)))
	}
	for _, gvr := range known {
		if gvr.Group != t.group || !slices.Contains(tryVersions, gvr.Version) {
			continue
		}
		if _, gvk, _, _ := src.Lookup(gvr.GroupVersion(), gvr.Resource); gvk.Kind != "" && pluralOf(gvk.Kind) == res {
			return Note, fmt.Sprintf("no object has this resource: %s is the plural guessed from the kind %s, which %s serves as %s; "+
				"only a tool that guesses resources from kinds (convoyctl health eval --guess-resources) matches it", res, gvk.Kind, gvr.GroupVersion(), gvr.Resource)
		}
	}
	where := "no resource " + res + " in " + t.apiVersion
	if !t.exactVersion {
		where = "no version of " + group + " has a resource " + res
	}
	if s := pluralOf(res); s != res && slices.Contains(atVersion, s) {
		return Error, fmt.Sprintf("%s; %s is one (resources are plural, lowercase)", where, s)
	}
	return Error, fmt.Sprintf("%s (its resources: %s)", where, listed(sorted(atVersion)))
}

// pluralHint returns the known resource of an apiVersion that t matches whose name is the
// plural of res, "" when there is none or res is itself known there.
func pluralHint(t target, res string, known []schema.GroupVersionResource) string {
	s := pluralOf(res)
	if s == res {
		return ""
	}
	for _, gvr := range known {
		if gvr.Resource == s && t.pattern.Matches(gvr.GroupVersion().String()) {
			return s
		}
	}
	return ""
}

// enumerate lists what src lists (Enumerator), nil when it cannot.
func enumerate(src SchemaSource) []schema.GroupVersionResource {
	if en, ok := src.(Enumerator); ok {
		return en.Resources()
	}
	return nil
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func sorted(list []string) []string {
	return slices.Sorted(slices.Values(list))
}
