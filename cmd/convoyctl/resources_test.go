package main

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kumodo/convoy-observer/internal/testenv"
)

const (
	pluralRules   = "../../testdata/rules-engine/plural.rules.yaml"
	pluralObjects = "../../testdata/rules-engine/plural.objects.yaml"
	chaosLine     = `{"apiVersion":"chaos-mesh.org/v1alpha1","kind":"%s","namespace":"chaos","name":"%s","state":"Progressing",` +
		`"message":"chaos not injected yet","decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"chaos-experiments","rule":0,"cause":"RuleFailed"},"rulesApplied":1}` + "\n"
)

func chaos(kind, name string) string {
	return strings.Replace(strings.Replace(chaosLine, "%s", kind, 1), "%s", name, 1)
}

// TestPluralCase: testdata/rules-engine/plural. With the resources named, both
// objects are assessed by the rule written for the CRDs' real plurals; with nothing that
// names them, exit 2 naming the kind; with --guess-resources, the guess is reported on
// stderr and in the line (and the rule, written for the real plural, does not apply).
func TestPluralCase(t *testing.T) {
	t.Parallel()
	eval := []string{"health", "eval", "--rules", pluralRules, "--object", pluralObjects}
	assertRun(t, append(eval, "--resource", "NetworkChaos=networkchaos", "--resource", "PodChaos.chaos-mesh.org=podchaos"), 0,
		chaos("NetworkChaos", "delay-db")+chaos("PodChaos", "kill-web"), "")
	assertRun(t, eval, 2, "", "NetworkChaos chaos/delay-db: no resource known for kind NetworkChaos of chaos-mesh.org/v1alpha1: name it with --resource NetworkChaos=PLURAL")

	// flect guesses chaos-mesh's real plural (uncountable "chaos"), so the rule of
	// networkchaos matches, and the output still says the resource was guessed.
	code, stdout, stderr := runCLI(append(eval, "--guess-resources")...)
	if code != 0 || !strings.Contains(stderr, `guessed resource "networkchaos" for kind NetworkChaos`) ||
		!strings.Contains(stdout, `"kind":"NetworkChaos","namespace":"chaos","name":"delay-db","state":"Progressing"`) ||
		!strings.Contains(stdout, `"resourceGuessed":"networkchaos","rulesApplied":1}`) {
		t.Errorf("--guess-resources: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, bad := range []string{"NetworkChaos", "=x", "NetworkChaos=NetworkChaos", "NetworkChaos=a/b"} {
		assertRun(t, append(eval, "--resource", bad), 2, "", "invalid --resource")
	}
}

// TestDiscoveryMapping runs against a real API server: the built-in mapper agrees with
// the server's discovery for every built-in kind the server serves, and --kubeconfig
// maps a CRD's kind to the plural it registers.
func TestDiscoveryMapping(t *testing.T) {
	env, err := testenv.StartTarget()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	ctx := context.Background()

	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "networkchaos.chaos-mesh.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "chaos-mesh.org",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "networkchaos", Singular: "networkchaos", Kind: "NetworkChaos"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true)}}}},
		},
	}
	sch := env.Scheme
	_ = apiextensionsv1.AddToScheme(sch)
	c, err := client.New(env.Config, client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the CRD is served.
	if err := wait.PollUntilContextTimeout(ctx, 100e6, 30e9, true, func(context.Context) (bool, error) {
		_, err := dc.ServerResourcesForGroupVersion("chaos-mesh.org/v1alpha1")
		return err == nil, nil
	}); err != nil {
		t.Fatal("the CRD is not served")
	}

	builtin := &resourceMapper{explicit: map[string]string{}}
	builtin.mappers = append(builtin.mappers, builtinMapper())
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, l := range lists {
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || l.GroupVersion == "chaos-mesh.org/v1alpha1" || l.GroupVersion == "apiextensions.k8s.io/v1" ||
				l.GroupVersion == "apiregistration.k8s.io/v1" {
				continue // subresources; the CRD; kinds outside client-go's scheme
			}
			m, err := builtin.resourceFor(l.GroupVersion, r.Kind)
			if err != nil {
				t.Errorf("%s %s: %v", l.GroupVersion, r.Kind, err)
				continue
			}
			if m.resource != r.Name {
				t.Errorf("%s %s: mapped to %q, the server serves %q", l.GroupVersion, r.Kind, m.resource, r.Name)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Errorf("only %d built-in kinds checked", checked)
	}

	kc := adminKubeconfig(t, env)
	code, stdout, stderr := runCLI("health", "eval", "--rules", pluralRules, "--object", pluralObjects,
		"--kubeconfig", kc, "--resource", "PodChaos=podchaos")
	if code != 0 || stdout != chaos("NetworkChaos", "delay-db")+chaos("PodChaos", "kill-web") {
		t.Errorf("with --kubeconfig: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

func ptr[T any](v T) *T { return &v }

// TestRulesEngineCases: the duplicate-key and amplify-replace cases of
// testdata/rules-engine (the plural case is TestPluralCase).
func TestRulesEngineCases(t *testing.T) {
	t.Parallel()
	dir := "../../testdata/rules-engine/"
	assertRun(t, []string{"health", "eval", "--rules", dir + "duplicate-key.rules.yaml", "--object", dir + "duplicate-key.object.yaml"}, 2, "",
		`duplicate key "ruleExpression" at spec.rules[0].ruleExpression (line 10; first at line 9)`)
	assertRun(t, []string{"health", "eval", "--rules", dir + "amplify-replace.rules.yaml", "--object", dir + "amplify-replace.object.yaml"}, 0,
		`{"apiVersion":"v1","kind":"ConfigMap","namespace":"tenant-a","name":"settings","state":"Unknown",`+
			`"message":"evaluation error: operation cancelled: actual cost limit exceeded",`+
			`"decidedBy":{"kind":"HealthRuleSet","namespace":"tenant-a","name":"tenant-rules","rule":0,"cause":"EvaluationError"},"rulesApplied":1}`+"\n", "")
}

// TestBuiltinKindsOfTheAPIServer: health eval maps CustomResourceDefinition and
// APIService, which the API server serves by default (apiextensions, apiregistration),
// without --resource, so the library's apiserver set judges them.
func TestBuiltinKindsOfTheAPIServer(t *testing.T) {
	t.Parallel()
	objects := writeFile(t, "objects.yaml", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
status:
  conditions:
  - {type: Established, status: "True"}
  - {type: NamesAccepted, status: "True"}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
status:
  conditions:
  - {type: Available, status: "False", reason: FailedDiscoveryCheck}
`)
	code, stdout, stderr := runCLI("health", "eval", "--rules", "../../health/library/apiserver.yaml", "--object", objects)
	if code != 0 || strings.Count(stdout, `"rulesApplied":1`) != 2 ||
		!strings.Contains(stdout, `"kind":"CustomResourceDefinition","namespace":"","name":"widgets.example.com","state":"Healthy"`) ||
		!strings.Contains(stdout, `"kind":"APIService","namespace":"","name":"v1beta1.metrics.k8s.io","state":"Progressing"`) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
