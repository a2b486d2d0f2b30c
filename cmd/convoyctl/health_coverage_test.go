package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// coverageRules judges ConfigMaps exactly and every resource of every apps version by
// a wildcard.
const coverageRules = `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: GlobalHealthRuleSet
metadata: {name: cover}
spec:
  rules:
  - {apiVersion: v1, resources: [configmaps], ruleExpression: "true"}
  - {apiVersion: "apps/*", resources: ["*"], ruleExpression: "true"}
`

// coverageObjects holds loose objects and a ReleaseInventory whose entries count as
// objects of the inventory's Release.
const coverageObjects = `apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: demo}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: demo}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: demo}
---
apiVersion: convoy.kumodo.io/v1alpha1
kind: ReleaseInventory
metadata: {name: shop, namespace: demo}
entries:
- {group: "", version: v1, kind: Secret, resource: secrets, namespace: demo, name: tls}
- {group: "", version: v1, kind: Service, resource: services, namespace: demo, name: web}
- {group: apps, version: v1, kind: Deployment, resource: deployments, namespace: demo, name: web}
- {group: example.com, version: v1, kind: Widget, resource: widgets, namespace: demo, name: w}
`

// TestHealthCoverageFromFiles: the kinds that no rule judges, with their objects and
// inventories, the most frequent first; exit 3 while some kind is unjudged, 0 when
// every kind is judged; bad input exits 2 and rules that do not compile exit 1.
func TestHealthCoverageFromFiles(t *testing.T) {
	t.Parallel()
	rules := writeFile(t, "rules.yaml", coverageRules)
	objects := writeFile(t, "objects.yaml", coverageObjects)
	assertRun(t, []string{"health", "coverage", "--rules", rules, "--object", objects}, exitUnjudged,
		`APIVERSION      KIND     RESOURCE  OBJECTS  RELEASES
v1              Secret   secrets   2        1
example.com/v1  Widget   widgets   1        1
v1              Service  services  1        1
3 of 6 kinds are judged by no rule: 4 of 7 objects in 1 ReleaseInventories pass unjudged.
`, "3 kinds are judged by no rule")

	// --kind, with the resource of a custom kind named.
	assertRun(t, []string{"health", "coverage", "--rules", rules, "--kind", "apps/v1beta2/ReplicaSet", "--kind", "v1/ConfigMap",
		"--kind", "example.com/v1/Widget", "--resource", "Widget=widgets"}, exitUnjudged,
		`APIVERSION      KIND    RESOURCE  OBJECTS  RELEASES
example.com/v1  Widget  widgets   1        0
1 of 3 kinds are judged by no rule: 1 of 3 objects pass unjudged.
`, "")

	// A rule set that judges the rest: exit 0.
	rest := writeFile(t, "rest.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: HealthRuleSet
metadata: {name: rest, namespace: demo}
spec:
  rules:
  - {apiVersion: v1, resources: [secrets, services], ruleExpression: "true"}
  - {apiVersion: "*.com/*", resources: ["*"], ruleExpression: "true"}
`)
	assertRun(t, []string{"health", "coverage", "--rules", rules, "--rules", rest, "--object", objects}, exitOK,
		"Every kind is judged by some rule: 6 kinds, 7 objects.\n", "")

	broken := writeFile(t, "broken.yaml", strings.Replace(coverageRules, `ruleExpression: "true"}`, `ruleExpression: "object.("}`, 1))
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"rules do not compile", []string{"--rules", broken, "--object", objects}, exitCompileError, "rule set does not compile"},
		{"no rules", []string{"--object", objects}, exitUsage, "give --rules"},
		{"no objects", []string{"--rules", rules}, exitUsage, "give --object or --kind"},
		{"bad kind", []string{"--rules", rules, "--kind", "Deployment"}, exitUsage, `invalid --kind "Deployment"`},
		{"kind with an empty group", []string{"--rules", rules, "--kind", "/v1/Pod"}, exitUsage, `invalid --kind "/v1/Pod": apiVersion "/v1"`},
		{"kind with two slashes", []string{"--rules", rules, "--kind", "apps//v1/Deployment"}, exitUsage, `invalid --kind "apps//v1/Deployment": apiVersion "apps//v1"`},
		{"kind with a pattern", []string{"--rules", rules, "--kind", "apps/*/Deployment"}, exitUsage, `invalid --kind "apps/*/Deployment": apiVersion "apps/*"`},
		{"kind that is no name", []string{"--rules", rules, "--kind", "v1/con fig"}, exitUsage, `invalid --kind "v1/con fig": kind "con fig"`},
		{"unknown resource", []string{"--rules", rules, "--kind", "example.com/v1/Gadget"}, exitUsage, "no resource known for kind Gadget of example.com/v1: name it with --resource Gadget=PLURAL, or --guess-resources"},
		{"missing file", []string{"--rules", rules, "--object", objects + ".missing"}, exitUsage, "reading objects"},
		{"files and cluster", []string{"--rules", rules, "--object", objects, "--kubeconfig", objects}, exitUsage, "use one or the other"},
		{"served without cluster", []string{"--rules", rules, "--object", objects, "--served"}, exitUsage, "need a cluster: --kubeconfig"},
		// A setting of the connection is not a cluster: still the files.
		{"timeout is not a cluster", []string{"--rules", rules, "--object", objects, "--served", "--request-timeout", "5s"}, exitUsage, "need a cluster: --kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assertRun(t, append([]string{"health", "coverage"}, tc.args...), tc.code, "", tc.stderr)
		})
	}
}

// TestHealthCoverageCluster: --kubeconfig reads the Releases of a namespace on the real
// API server, their inventories' recorded entries and the rule sets each selects (an
// entry of a kind that one Release's rules judge and another's do not counts for the
// second), skips Releases without healthAssessment, names a Release whose rules do not
// compile (exit 1); --rules adds sets to every selection; --served lists the served
// resources that no selected rule judges.
func TestHealthCoverageCluster(t *testing.T) {
	env := controlPlane(t)
	kubeconfig := adminKubeconfig(t, env)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const ns = "coverage"
	must(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	ruleSet := func(name, expr string, rules ...extv1alpha1.RuleSpec) {
		t.Helper()
		for i := range rules {
			rules[i].RuleExpression = expr
		}
		must(env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"set": name}},
			Spec:       extv1alpha1.HealthRuleSetSpec{Rules: rules},
		}))
	}
	ruleSet("configmaps", "true", extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps"}})
	ruleSet("secrets", "true", extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"secrets", "configmaps"}})
	ruleSet("broken", "object.(", extv1alpha1.RuleSpec{APIVersion: "v1", Resources: []string{"configmaps"}})
	release := func(name, set string, entries ...[3]string) {
		t.Helper()
		rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"}}}
		if set != "" {
			rel.Spec.HealthAssessment = &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": set}}}
		}
		must(env.Client.Create(ctx, rel))
		var list []any
		for _, e := range entries { // kind, resource, name (core group, v1)
			list = append(list, map[string]any{"group": "", "kind": e[0], "namespace": ns, "name": e[2],
				"version": "v1", "resource": e[1], "wave": int64(0), "renderRef": "r1"})
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "ReleaseInventory",
			"metadata": map[string]any{"name": name, "namespace": ns}, "entries": list}}
		must(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(cmManager), client.ForceOwnership))
	}
	cm, secret, svc := [3]string{"ConfigMap", "configmaps", "cfg"}, [3]string{"Secret", "secrets", "creds"}, [3]string{"Service", "services", "web"}
	release("shop", "configmaps", cm, secret, svc)
	release("blog", "secrets", cm, secret)
	release("lab", "", cm, secret, svc)

	base := []string{"health", "coverage", "--kubeconfig", kubeconfig, "-n", ns}
	assertRun(t, base, exitUnjudged, `APIVERSION  KIND     RESOURCE  OBJECTS  RELEASES
v1          Secret   secrets   1        1
v1          Service  services  1        1
2 of 3 kinds are judged by no rule: 2 of 5 objects in 1 Releases pass unjudged.
1 of 3 Releases has no spec.healthAssessment: nothing judges its objects, on purpose, and they are not counted.
`, "2 kinds are judged by no rule")

	// A set from a file, added to every selection, judges the Services.
	services := writeFile(t, "services.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: GlobalHealthRuleSet
metadata: {name: services}
spec:
  rules:
  - {apiVersion: v1, resources: [services, secrets], ruleExpression: "true"}
`)
	assertRun(t, append(base, "--rules", services), exitOK, "Every kind is judged by some rule: 3 kinds, 5 objects.\n"+
		"1 of 3 Releases has no spec.healthAssessment: nothing judges its objects, on purpose, and they are not counted.\n", "")

	// --served: every served resource that neither set judges, such as pods and the
	// Releases themselves; not configmaps or secrets.
	code, stdout, _ := runCLI(append(base, "--served")...)
	if code != exitUnjudged {
		t.Errorf("--served: exit %d, want %d", code, exitUnjudged)
	}
	for _, want := range []string{"pods", "releases", "deployments", "services"} {
		if !strings.Contains(stdout, " "+want+" ") {
			t.Errorf("--served does not list %s:\n%s", want, stdout)
		}
	}
	for _, judged := range []string{" configmaps ", "pods/log"} {
		if strings.Contains(stdout, judged) {
			t.Errorf("--served lists %q, which a rule judges or is a subresource:\n%s", judged, stdout)
		}
	}

	// A Release whose rules do not compile is named, not counted, and exits 1.
	release("broken", "broken", svc)
	code, stdout, stderr := runCLI(base...)
	if code != exitCompileError || !strings.Contains(stderr, "Release coverage/broken is not counted: its rules do not compile") ||
		!strings.Contains(stdout, "2 of 5 objects in 1 Releases") {
		t.Errorf("broken rules: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
