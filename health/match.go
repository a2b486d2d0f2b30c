package health

import (
	"strings"
)

// Wildcard is the value that, as a rule's apiVersion, its group, its version or one of its
// resources, matches every value there.
const Wildcard = "*"

// APIVersionPattern is a rule's apiVersion read as a pattern. A rule's apiVersion is one
// of:
//
//   - "VERSION" (core group) or "GROUP/VERSION": that apiVersion only;
//   - "*": every apiVersion, the core group's ("v1") included;
//   - "GROUP/*": every version of GROUP;
//   - "*/VERSION" or "*/*": VERSION (every version) of every group, core included;
//   - "*.SUFFIX/VERSION" or "*.SUFFIX/*": every group that ends with ".SUFFIX" (so
//     "*.upbound.io/*" matches "s3.aws.upbound.io/v1beta1" but not "upbound.io/v1").
//
// Any other apiVersion holding a "*" is not a pattern: it is compared literally, as the
// spec compares every apiVersion, and since no real group or version holds a "*" it
// matches nothing (ParseAPIVersionPattern reports it, so lint can say so).
type APIVersionPattern struct {
	literal     string // the whole apiVersion when it is no pattern
	isPattern   bool
	anyGroup    bool
	groupSuffix string // ".SUFFIX" for "*.SUFFIX"
	group       string // the exact group otherwise
	anyVersion  bool
	version     string // the exact version otherwise
}

// ParseAPIVersionPattern reads a rule's apiVersion. The pattern is a wildcard when it
// holds a "*" in one of the positions APIVersionPattern lists; misplaced is true when it
// holds a "*" anywhere else (such as "apps*/v1", "*.upbound.io" without a version, or
// "*upbound.io/v1"), and the pattern then compares the apiVersion literally.
func ParseAPIVersionPattern(apiVersion string) (p APIVersionPattern, misplaced bool) {
	p.literal = apiVersion
	if !strings.Contains(apiVersion, Wildcard) {
		return p, false
	}
	if apiVersion == Wildcard {
		p.isPattern, p.anyGroup, p.anyVersion = true, true, true
		return p, false
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok || group == "" || version == "" || strings.Contains(version, "/") {
		return p, true
	}
	switch {
	case version == Wildcard:
		p.anyVersion = true
	case strings.Contains(version, Wildcard):
		return p, true
	default:
		p.version = version
	}
	switch {
	case group == Wildcard:
		p.anyGroup = true
	case strings.HasPrefix(group, "*.") && len(group) > 2 && !strings.Contains(group[2:], Wildcard):
		p.groupSuffix = group[1:]
	case strings.Contains(group, Wildcard):
		return p, true
	default:
		p.group = group
	}
	p.isPattern = true
	return p, false
}

// IsWildcard reports whether the pattern matches more than one apiVersion.
func (p APIVersionPattern) IsWildcard() bool { return p.isPattern }

// Matches reports whether an object's apiVersion ("apps/v1", or "v1" for the core
// group) matches the pattern.
func (p APIVersionPattern) Matches(apiVersion string) bool {
	if !p.isPattern {
		return apiVersion == p.literal
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	if !p.anyVersion && version != p.version {
		return false
	}
	switch {
	case p.anyGroup:
		return true
	case p.groupSuffix != "":
		return len(group) > len(p.groupSuffix) && strings.HasSuffix(group, p.groupSuffix)
	default:
		return group == p.group
	}
}

// MatchesResource reports whether a rule that lists resources applies to resource: one
// of them equals it, or one of them is "*".
func MatchesResource(resources []string, resource string) bool {
	for _, r := range resources {
		if r == resource || r == Wildcard {
			return true
		}
	}
	return false
}

// RuleMatches reports whether a rule applies to an object of the given apiVersion and
// plural lowercase resource, as Evaluate matches it: its apiVersion pattern matches the
// object's apiVersion and one of its resources is the resource or "*". The kind is never
// matched.
func RuleMatches(ruleAPIVersion string, ruleResources []string, apiVersion, resource string) bool {
	p, _ := ParseAPIVersionPattern(ruleAPIVersion)
	return p.Matches(apiVersion) && MatchesResource(ruleResources, resource)
}
