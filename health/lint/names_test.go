package lint_test

import (
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/lint"
)

// TestTargetNames: whatever the apiVersion (exact or a pattern), a resource that cannot
// be a resource name, and an apiVersion whose group, "*.SUFFIX" suffix or version cannot
// be one, match no object, and are errors saying what they should be. A well-formed
// resource that no version of an exactly named, known group has is an error as it is for
// an exact apiVersion; under a wildcard group it is a note when a known resource of a
// matching apiVersion has the plural of its name.
func TestTargetNames(t *testing.T) {
	t.Parallel()
	src := lint.Sources{&lint.Builtin{}, crds(t, "testdata/widgets-crd.yaml", "testdata/things-crd.yaml",
		"testdata/crds/proclaim.dogmatiq.io_dnssd-service-instances.yaml")}
	const p = "GlobalHealthRuleSet/t rule 0 "
	for _, tc := range []struct {
		name       string
		apiVersion string
		resources  []string
		want       []string // findings other than the wildcard note, each a prefix
	}{
		// Resources that are no resource name.
		{name: "kind under a version pattern", apiVersion: "apps/*", resources: []string{"Deployment"},
			want: []string{`error: ` + p + `resources: "Deployment" is a kind, not a resource: resources name plural lowercase resources, such as deployments`}},
		{name: "kind under an exact apiVersion", apiVersion: "apps/v1", resources: []string{"Deployment"},
			want: []string{`error: ` + p + `resources: "Deployment" is a kind, not a resource`}},
		{name: "kind under every apiVersion", apiVersion: "*", resources: []string{"NetworkPolicy"},
			want: []string{`error: ` + p + `resources: "NetworkPolicy" is a kind, not a resource: resources name plural lowercase resources, such as networkpolicies`}},
		{name: "kind of an unknown group", apiVersion: "example.org/v1", resources: []string{"Gizmo"},
			want: []string{`error: ` + p + `resources: "Gizmo" is a kind, not a resource`}},
		{name: "upper case", apiVersion: "v1", resources: []string{"PODS"},
			want: []string{`error: ` + p + `resources: "PODS" is not a resource name: resources are plural, lowercase names`}},
		{name: "subresource", apiVersion: "apps/v1", resources: []string{"deployments/status"},
			want: []string{`error: ` + p + `resources: "deployments/status" is a subresource: a rule applies to objects, name their resource alone (deployments)`}},
		{name: "empty resource", apiVersion: "*", resources: []string{""},
			want: []string{`error: ` + p + `resources: "" is not a resource name`}},
		{name: "underscore", apiVersion: "example.com/*", resources: []string{"wid_gets"},
			want: []string{`error: ` + p + `resources: "wid_gets" is not a resource name`}},
		{name: "one bad resource among good ones", apiVersion: "apps/v1", resources: []string{"deployments", "StatefulSet"},
			want: []string{`error: ` + p + `resources: "StatefulSet" is a kind, not a resource: resources name plural lowercase resources, such as statefulsets`}},

		// apiVersions that are no apiVersion.
		{name: "upper-case group, every resource", apiVersion: "Apps/v1", resources: []string{"*"},
			want: []string{`error: ` + p + `apiVersion: "Apps/v1": group "Apps" is not an API group name: groups are lowercase DNS subdomains`}},
		{name: "upper-case group, exact", apiVersion: "Apps/v1", resources: []string{"deployments"},
			want: []string{`error: ` + p + `apiVersion: "Apps/v1": group "Apps" is not an API group name`}},
		{name: "slash alone, every resource", apiVersion: "/", resources: []string{"*"},
			want: []string{`error: ` + p + `apiVersion: "/" is not an apiVersion: it has no group and no version`}},
		{name: "slash alone", apiVersion: "/", resources: []string{"pods"},
			want: []string{`error: ` + p + `apiVersion: "/" is not an apiVersion`}},
		{name: "empty suffix part", apiVersion: "*..io/v1", resources: []string{"*"},
			want: []string{`error: ` + p + `apiVersion: "*..io/v1": ".io" after "*." is not a DNS subdomain`}},
		{name: "upper-case suffix", apiVersion: "*.Example.com/*", resources: []string{"*"},
			want: []string{`error: ` + p + `apiVersion: "*.Example.com/*": "Example.com" after "*." is not a DNS subdomain`}},
		{name: "no group before the slash", apiVersion: "/v1", resources: []string{"pods"},
			want: []string{`error: ` + p + `apiVersion: "/v1": no group before the "/": the core group's apiVersion is the version alone, such as v1`}},
		{name: "no version after the slash", apiVersion: "apps/", resources: []string{"deployments"},
			want: []string{`error: ` + p + `apiVersion: "apps/": no version after the "/"`}},
		{name: "two slashes", apiVersion: "apps/v1/x", resources: []string{"*"},
			want: []string{`error: ` + p + `apiVersion: "apps/v1/x" holds more than one "/"`}},
		{name: "upper-case version", apiVersion: "apps/V1", resources: []string{"deployments"},
			want: []string{`error: ` + p + `apiVersion: "apps/V1": version "V1" is not an API version: versions are lowercase DNS-1035 labels such as v1 or v1beta1`}},
		{name: "upper-case core version, every group", apiVersion: "*/V1", resources: []string{"*"},
			want: []string{`error: ` + p + `apiVersion: "*/V1": version "V1" is not an API version`}},
		{name: "version starting with a digit", apiVersion: "1", resources: []string{"pods"},
			want: []string{`error: ` + p + `apiVersion: "1": version "1" is not an API version`}},
		{name: "core group named", apiVersion: "core/v1", resources: []string{"pods"},
			want: []string{`error: ` + p + `apiVersion: "core/v1": the core group has no name: its apiVersion is the version alone, such as v1`}},

		// Well-formed names that nothing known has.
		{name: "singular under a version pattern of a built-in group", apiVersion: "apps/*", resources: []string{"deployment"},
			want: []string{`error: ` + p + `resources: apps/* deployment matches nothing known: no version of apps has a resource deployment; deployments is one (resources are plural, lowercase)`}},
		{name: "singular under every apiVersion", apiVersion: "*", resources: []string{"deployment"},
			want: []string{`note: ` + p + `resources: * deployment: no resource that the schema sources know of an apiVersion matching * is named deployment, but deployments is`,
				`note: ` + p + `resources: * deployment not type-checked: a wildcard, and no schema known matches it`}},
		{name: "singular under every group", apiVersion: "*/v1", resources: []string{"pod"},
			want: []string{`note: ` + p + `resources: */v1 pod: no resource that the schema sources know of an apiVersion matching */v1 is named pod, but pods is`,
				`note: ` + p + `resources: */v1 pod not type-checked: a wildcard, and no schema known matches it`}},
		{name: "unknown resource of a CRD group", apiVersion: "example.com/*", resources: []string{"gadgets"},
			want: []string{`error: ` + p + `resources: example.com/* gadgets matches nothing known: no version of example.com has a resource gadgets (its resources: things, widgets)`}},
		{name: "unknown version of a built-in group, every resource", apiVersion: "apps/v2", resources: []string{"*"},
			want: []string{`error: ` + p + `resources: apps/v2 * matches nothing known: group apps has no version v2 (it has v1, v1beta1, v1beta2)`}},
		{name: "unknown version of a built-in group, exact", apiVersion: "apps/v2", resources: []string{"deployments"},
			want: []string{`error: ` + p + `resources: apps/v2 deployments matches nothing known: group apps has no version v2 (it has v1, v1beta1, v1beta2)`}},
		{name: "unknown resource, exact", apiVersion: "apps/v1", resources: []string{"deployment"},
			want: []string{`error: ` + p + `resources: apps/v1 deployment matches nothing known: no resource deployment in apps/v1; deployments is one (resources are plural, lowercase)`}},
		{name: "singular next to every resource", apiVersion: "apps/v1", resources: []string{"*", "deployment"},
			want: []string{`error: ` + p + `resources: apps/v1 deployment matches nothing known: no resource deployment in apps/v1; deployments is one`}},
		{name: "version a CRD given does not serve, every resource", apiVersion: "example.com/v2", resources: []string{"*"},
			want: []string{`note: ` + p + `resources: example.com/v2 * not type-checked: a wildcard, and no schema known matches it`}},
		{name: "unknown group", apiVersion: "example.org/*", resources: []string{"gizmos"},
			want: []string{`note: ` + p + `resources: example.org/* gizmos not type-checked: a wildcard, and no schema known matches it`}},

		{name: "plural guessed from a kind, next to the real one", apiVersion: "proclaim.dogmatiq.io/*", resources: []string{"dnssd-service-instances", "dnssdserviceinstances"},
			want: []string{`note: ` + p + `resources: proclaim.dogmatiq.io/* dnssdserviceinstances: no object has this resource: dnssdserviceinstances is the plural guessed from the kind DNSSDServiceInstance, which proclaim.dogmatiq.io/v1 serves as dnssd-service-instances; only a tool that guesses resources from kinds (convoyctl health eval --guess-resources) matches it`}},
		{name: "plural guessed from a kind, exact", apiVersion: "proclaim.dogmatiq.io/v1", resources: []string{"dnssdserviceinstances"},
			want: []string{`note: ` + p + `resources: proclaim.dogmatiq.io/v1 dnssdserviceinstances: no object has this resource: dnssdserviceinstances is the plural guessed from the kind DNSSDServiceInstance`}},

		// Well-formed and known.
		{name: "version pattern", apiVersion: "apps/*", resources: []string{"deployments"}},
		{name: "suffix pattern", apiVersion: "*.k8s.io/*", resources: []string{"*"}},
		{name: "core", apiVersion: "v1", resources: []string{"pods", "*"}},
		{name: "every group of a version", apiVersion: "*/v1", resources: []string{"deployments", "widgets"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assertRuleFindings(t, src, extv1alpha1.RuleSpec{APIVersion: tc.apiVersion, Resources: tc.resources, RuleExpression: "true"}, tc.want)
		})
	}
}
