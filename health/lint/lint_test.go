package lint_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/library"
	"github.com/kumodo/convoy-observer/health/lint"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// TestLintFindsEachMistake checks that every rule of testdata/bad.yaml gives exactly the
// finding its comment announces.
func TestLintFindsEachMistake(t *testing.T) {
	t.Parallel()
	g, l := manifesttest.RuleSets(t, "testdata/bad.yaml")
	got := lint.Lint(g, l, &lint.Builtin{})
	want := []struct {
		rule     int
		field    string
		fragment string
	}{
		{0, "ruleExpression", "undefined field 'readyReplica'"},
		{1, "ruleExpression", "found no matching overload for '_==_' applied to '(int, string)'"},
		{2, "ruleExpression", "has(object.spec.strategy.rollingUpdate.maxSurge): object.spec.strategy.rollingUpdate may be absent"},
		{3, "resources", "apps/v1 deployment matches nothing known"},
		{4, "resources", "autoscaling/v2beta2 horizontalpodautoscalers matches nothing known"},
		{5, "ruleExpression", "does not compile: ERROR"},
		{6, "messageExpression", "undefined field 'phaze'"},
	}
	if len(got) != len(want) {
		t.Errorf("%d findings, want %d:\n%s", len(got), len(want), join(got))
	}
	for i, w := range want {
		if i >= len(got) {
			break
		}
		f := got[i]
		if f.Severity != lint.Error || f.Rule != w.rule || f.Field != w.field || !strings.Contains(f.Message, w.fragment) ||
			f.RuleSet != "GlobalHealthRuleSet/bad" {
			t.Errorf("finding %d = %s; want error of rule %d %s containing %q", i, f, w.rule, w.field, w.fragment)
		}
	}
}

func TestLintGoodRules(t *testing.T) {
	t.Parallel()
	g, l := manifesttest.RuleSets(t, "testdata/good.yaml")
	got := lint.Lint(g, l, &lint.Builtin{})
	if lint.HasErrors(got) || len(got) != 1 || got[0].Severity != lint.Note || got[0].RuleSet != "HealthRuleSet/team-a/good" ||
		!strings.Contains(got[0].Message, "example.com/v1 widgets not type-checked") {
		t.Errorf("findings:\n%s\nwant one note on the CRD", join(got))
	}
}

// crds reads every CustomResourceDefinition of the given files.
func crds(t *testing.T, paths ...string) *lint.CRDs {
	t.Helper()
	src, err := lint.NewCRDs(manifesttest.CRDs(t, paths...))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// thirdPartyGroups are the groups of the library's rules that Kubernetes does not serve:
// offline, only their rules may go unchecked.
var thirdPartyGroups = []string{
	"tekton.dev",
	"eventing.knative.dev", "messaging.knative.dev", "flows.knative.dev", "sources.knative.dev", "sinks.knative.dev",
	"serving.knative.dev",
	"operator.knative.dev",
	"microgateway.airlock.com", "networking.gke.io", "kafka.banzaicloud.io",
	"cdi.kubevirt.io",
	"kubevirt.io", "pool.kubevirt.io",
	"flagger.app",
	"projectcontour.io",
	"platform.confluent.io",
	"kafka.strimzi.io",
	"argoproj.io", "cert-manager.io", "certmanager.k8s.io", "gateway.networking.k8s.io", "gateway.networking.x-k8s.io", "keda.sh", "helm.toolkit.fluxcd.io",
	"image.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io", "notification.toolkit.fluxcd.io", "source.toolkit.fluxcd.io",
	"policy.open-cluster-management.io",
	"promoter.argoproj.io",
	"serving.kserve.io",
	"cluster.x-k8s.io", "addons.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io",
	"work.karmada.io",
	"lifecycle.keptn.sh", "metrics.keptn.sh",
	"k8s.mariadb.com", "mariadb.mmontes.io",
	"grafana.integreatly.org", "grafana-org-operator.kubitus-project.gitlab.io",
	"external-secrets.io",
	"core.humio.com",
	"minio.min.io",
	"services.cloud.sap.com",
	"tower.ansible.com",
	"operators.coreos.com",
	"elasticsearch.k8s.elastic.co", "kibana.k8s.elastic.co", "apm.k8s.elastic.co", "enterprisesearch.k8s.elastic.co", "maps.k8s.elastic.co", "agent.k8s.elastic.co", "beat.k8s.elastic.co", "logstash.k8s.elastic.co",
	"ceph.rook.io", "cassandra.rook.io",
	"sparkoperator.k8s.io",
	"proclaim.dogmatiq.io",
	"flink.apache.org",
	"trident.netapp.io",
	"snapshot.storage.k8s.io",
	"pxc.percona.com", "psmdb.percona.com",
	"db.atlasgo.io",
	"coralogix.com",
	"karpenter.sh", "karpenter.k8s.aws",
	"postgresql.cnpg.io",
	"operator.victoriametrics.com",
	"opentelemetry.io",
	"nmstate.io",
	"pulumi.com",
	"openfaas.com",
	"iammanager.keikoproj.io",
	"core.spinkube.dev",
	"core.gardener.cloud",
	"clickhouse.altinity.com", "clickhouse-keeper.altinity.com",
	"acid.zalan.do",
	"spot.io",
	"solr.apache.org",
	"ocs.openshift.io",
	"objectbucket.io",
	"monitoring.coreos.com",
	"jaegertracing.io",
	"datadoghq.com",
	"camel.apache.org",
	"zookeeper.pravega.io",
	"kyverno.io",
	"astra.netapp.io",
	"gateway.solo.io", "gloo.solo.io", "enterprise.gloo.solo.io",
	"apps.3scale.net", "capabilities.3scale.net",
	"numaflow.numaproj.io", "numaplane.numaproj.io",
	"rabbitmq.com",
	"apps.kruise.io", "rollouts.kruise.io", "game.kruise.io",
	"apps.openshift.io", "route.openshift.io", "operator.openshift.io",
	"k8s.keycloak.org", "install.istio.io", "kiali.io", "onepassword.com", "kubernetes-client.io", "bitnami.com",
}

// unvendoredGroups are the third-party groups whose CRDs testdata/crds lacks (see its
// README): with the CRDs given, their rules may still go unchecked (a note), nothing else.
// An entry GROUP/VERSION exempts that version alone (its group's other versions are
// vendored).
var unvendoredGroups = []string{
	// The v1alpha1 rule reads the status of both operator 0.1 and 1.x, which v1alpha1's
	// schema does not declare (see testdata/crds/README.md).
	"flink.apache.org/v1alpha1",
	"platform.confluent.io",
	"grafana-org-operator.kubitus-project.gitlab.io",
	"minio.min.io",
	"tower.ansible.com",
	"elasticsearch.k8s.elastic.co", "kibana.k8s.elastic.co", "apm.k8s.elastic.co", "enterprisesearch.k8s.elastic.co", "maps.k8s.elastic.co", "agent.k8s.elastic.co", "beat.k8s.elastic.co", "logstash.k8s.elastic.co",
	"trident.netapp.io",
	"psmdb.percona.com",
	"openfaas.com",
	"core.gardener.cloud",
	"spot.io",
	"astra.netapp.io",
	"gateway.solo.io", "gloo.solo.io", "enterprise.gloo.solo.io",
	"apps.openshift.io",
	"k8s.keycloak.org", "install.istio.io", "kiali.io", "kubernetes-client.io",
}

// TestLibraryAndDefaultsLintClean: the shipped rule sets have no finding. Offline, the
// only notes are of the third-party CRDs (every kind that Kubernetes serves, APIService
// and CustomResourceDefinition included, has its built-in schema); with the CRDs of
// testdata/crds (trimmed upstream CRDs, see testdata/crds/README.md) there is no
// finding at all, except notes for the groups of unvendoredGroups and on a plural
// guessed from a kind (isGuessedPluralNote).
func TestLibraryAndDefaultsLintClean(t *testing.T) {
	t.Parallel()
	sets, err := library.RuleSets()
	if err != nil {
		t.Fatal(err)
	}
	dg, _ := manifesttest.RuleSets(t, "../convoy-defaults.yaml")
	all := append(dg, sets...)
	for _, f := range lint.Lint(all, nil, &lint.Builtin{}) {
		group, _, _ := strings.Cut(strings.Fields(f.Message)[0], "/")
		if f.Severity != lint.Note || !slices.Contains(thirdPartyGroups, group) && !isWildcardNote(f) {
			t.Errorf("offline: %s", f)
		}
	}
	files, err := filepath.Glob("testdata/crds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in testdata/crds: %v", err)
	}
	for _, f := range lint.Lint(all, nil, lint.Sources{&lint.Builtin{}, crds(t, files...)}) {
		apiVersion := strings.Fields(f.Message)[0]
		group, _, _ := strings.Cut(apiVersion, "/")
		if f.Severity != lint.Note || !slices.Contains(unvendoredGroups, group) && !slices.Contains(unvendoredGroups, apiVersion) && !isWildcardNote(f) &&
			!isGuessedPluralNote(f) {
			t.Errorf("with testdata/crds: %s", f)
		}
	}
}

// isGuessedPluralNote reports whether f is the note on a resource that is the plural
// tools guess from a kind whose CRD names another plural (Proclaim's
// dnssdserviceinstances), which a library rule lists next to the real one so that
// convoyctl health eval --guess-resources matches it too.
func isGuessedPluralNote(f lint.Finding) bool {
	return f.Severity == lint.Note && strings.Contains(f.Message, " is the plural guessed from the kind ")
}

// isWildcardNote reports whether f is the note that says which known resources a
// wildcard rule was type-checked against: the resources no source knows stay unchecked.
func isWildcardNote(f lint.Finding) bool {
	return f.Severity == lint.Note && (strings.Contains(f.Message, " is a wildcard: type-checked against the ") ||
		wildcardFamilies[strings.Fields(f.Message)[0]] && strings.Contains(f.Message, " not type-checked: a wildcard, and no schema known matches it"))
}

// wildcardFamilies are the apiVersion patterns of the library whose CRDs (hundreds, one
// per provider resource) are not vendored in testdata/crds.
var wildcardFamilies = map[string]bool{
	"*.crossplane.io/*": true, "pkg.crossplane.io/*": true, "stacks.crossplane.io/*": true, "*.upbound.io/*": true,
	"*.cnrm.cloud.google.com/*": true, "*.services.k8s.aws/*": true,
}

// TestCRDSchemas: with a CRD given, its rules are type-checked against the schema of
// each served version (metadata as ObjectMeta); a version it does not serve, or whose
// schema declares no field, is a note, a resource of its group that it does not define
// an error.
func TestCRDSchemas(t *testing.T) {
	t.Parallel()
	g, l := manifesttest.RuleSets(t, "testdata/widgets-rules.yaml")
	got := lint.Lint(g, l, lint.Sources{&lint.Builtin{}, crds(t, "testdata/widgets-crd.yaml")})
	want := []string{
		"error: GlobalHealthRuleSet/widgets rule 1 ruleExpression: example.com/v1 widgets (Widget): undefined field 'colour'",
		"error: GlobalHealthRuleSet/widgets rule 2 ruleExpression: example.com/v1 widgets (Widget): found no matching overload for '_==_' applied to '(string, int)'",
		"note: GlobalHealthRuleSet/widgets rule 3 resources: example.com/v1beta1 widgets not type-checked: the CustomResourceDefinition given declares no fields for v1beta1",
		"note: GlobalHealthRuleSet/widgets rule 4 resources: example.com/v1alpha1 widgets not type-checked: the CustomResourceDefinition given serves v1, v1beta1, not v1alpha1",
		"error: GlobalHealthRuleSet/widgets rule 5 resources: example.com/v1 gadgets matches nothing known",
	}
	if len(got) != len(want) {
		t.Errorf("%d findings, want %d:\n%s", len(got), len(want), join(got))
	}
	for i := range min(len(got), len(want)) {
		if !strings.HasPrefix(got[i].String(), want[i]) {
			t.Errorf("finding %d = %s\nwant it to start with %s", i, got[i], want[i])
		}
	}

	// A version defined twice, and a schema that is not structural, are errors.
	crd := func(version string, props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.CustomResourceDefinition {
		return apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: version, Served: true, Schema: &apiextensionsv1.CustomResourceValidation{
				OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}}}}}}
	}
	if _, err := lint.NewCRDs([]apiextensionsv1.CustomResourceDefinition{crd("v1", nil), crd("v2", nil)}); err != nil {
		t.Errorf("two CRDs of one resource with different versions: %v", err)
	}
	if _, err := lint.NewCRDs([]apiextensionsv1.CustomResourceDefinition{crd("v1", nil), crd("v1", nil)}); err == nil || !strings.Contains(err.Error(), "version v1 of widgets.example.com is defined twice") {
		t.Errorf("a version defined twice: %v", err)
	}
	untyped := map[string]apiextensionsv1.JSONSchemaProps{"spec": {}} // no type: not structural
	if _, err := lint.NewCRDs([]apiextensionsv1.CustomResourceDefinition{crd("v1", untyped)}); err == nil || !strings.Contains(err.Error(), "not structural") {
		t.Errorf("a schema that is not structural: %v", err)
	}
}

func join(fs []lint.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

// TestWildcardRules: a wildcard rule is type-checked against every known resource it
// matches, and a note says so (or that nothing known matches it); a "*" that is no
// pattern is an error.
func TestWildcardRules(t *testing.T) {
	t.Parallel()
	g, l := manifesttest.RuleSets(t, "testdata/wildcard-rules.yaml")
	got := lint.Lint(g, l, lint.Sources{&lint.Builtin{}, crds(t, "testdata/widgets-crd.yaml")})
	want := []string{
		"error: GlobalHealthRuleSet/wild rule 0 ruleExpression: example.com/v1 widgets (Widget): undefined field 'colour'",
		"note: GlobalHealthRuleSet/wild rule 0 resources: *.com/* * is a wildcard: type-checked against the 1 known resources it matches (example.com/v1 widgets)",
		"error: GlobalHealthRuleSet/wild rule 1 ruleExpression: apps/v1 deployments (Deployment): undefined field 'ready'",
		"note: GlobalHealthRuleSet/wild rule 1 resources: */v1 widgets,deployments is a wildcard: type-checked against the 2 known resources it matches (apps/v1 deployments, example.com/v1 widgets)",
		"note: GlobalHealthRuleSet/wild rule 2 resources: *.upbound.io/* * not type-checked: a wildcard, and no schema known matches it",
		`error: GlobalHealthRuleSet/wild rule 3 apiVersion: "apps*/v1" matches nothing`,
		`error: GlobalHealthRuleSet/wild rule 4 resources: "deploy*" matches nothing`,
		"note: GlobalHealthRuleSet/wild rule 5 resources: * * is a wildcard: type-checked against the ",
	}
	if len(got) != len(want) {
		t.Errorf("%d findings, want %d:\n%s", len(got), len(want), join(got))
	}
	for i := range min(len(got), len(want)) {
		if !strings.HasPrefix(got[i].String(), want[i]) {
			t.Errorf("finding %d = %s\nwant it to start with %s", i, got[i], want[i])
		}
	}
}

// TestLintSizeLimits: lint reports what the loop refuses for its size, before
// type-checking: an expression over health.MaxExpressionNodes (at its rule), and a set
// whose expressions together go over health.MaxRuleSetSquaredNodes (at the rule that
// takes it over, though every rule alone compiles).
func TestLintSizeLimits(t *testing.T) {
	t.Parallel()
	rule := func(terms int) extv1alpha1.RuleSpec {
		return extv1alpha1.RuleSpec{APIVersion: "example.com/v1", Resources: []string{"widgets"}, // no schema: not type-checked
			RuleExpression: strings.Join(slices.Repeat([]string{"object.a==1"}, terms), "&&")}
	}
	big := extv1alpha1.HealthRuleSet{Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{rule(1), rule(1260)}}}
	big.Namespace, big.Name = "tenant", "big"
	many := extv1alpha1.HealthRuleSet{Spec: extv1alpha1.HealthRuleSetSpec{Rules: slices.Repeat([]extv1alpha1.RuleSpec{rule(190)}, 5)}}
	many.Namespace, many.Name = "tenant", "many"
	got := lint.Lint(nil, []extv1alpha1.HealthRuleSet{big, many}, &lint.Builtin{})
	var errs []lint.Finding
	for _, f := range got {
		if f.Severity == lint.Error {
			errs = append(errs, f)
		}
	}
	if len(errs) != 2 ||
		errs[0].RuleSet != "HealthRuleSet/tenant/big" || errs[0].Rule != 1 || errs[0].Field != "ruleExpression" ||
		!strings.Contains(errs[0].Message, "the expression has 6299 nodes, more than the limit of 1000") ||
		errs[1].RuleSet != "HealthRuleSet/tenant/many" || errs[1].Rule != 4 ||
		!strings.Contains(errs[1].Message, "split the rules into several rule sets") {
		t.Errorf("errors:\n%s\nwant rule 1 of big over the expression limit and rule 4 of many over the set limit", join(errs))
	}
}

// assertRuleFindings lints a set of the one rule against src and checks its findings,
// leaving out the notes that a wildcard rule is not type-checked everywhere: one per
// prefix of want, in order, and HasErrors exactly when some prefix is an "error:".
func assertRuleFindings(t *testing.T, src lint.SchemaSource, rule extv1alpha1.RuleSpec, want []string) {
	t.Helper()
	set := extv1alpha1.GlobalHealthRuleSet{}
	set.Name = "t"
	set.Spec.Rules = []extv1alpha1.RuleSpec{rule}
	var got []lint.Finding
	for _, f := range lint.Lint([]extv1alpha1.GlobalHealthRuleSet{set}, nil, src) {
		if !isWildcardNote(f) {
			got = append(got, f)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d findings, want %d:\n%s", len(got), len(want), join(got))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].String(), w) {
			t.Errorf("finding %d = %s\nwant it to start with %s", i, got[i], w)
		}
	}
	if wantErr := strings.Contains(strings.Join(want, "\n"), "error:"); lint.HasErrors(got) != wantErr {
		t.Errorf("HasErrors = %v with findings:\n%s", lint.HasErrors(got), join(got))
	}
}
