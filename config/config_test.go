// Tests of the deploy manifests under config/: `kubectl kustomize config/default` (here
// rendered with the kustomize Go API, as kubectl does) must build, hold every object
// that convoy-observer and convoy-api need, keep the RBAC to the documented minimum and
// pass the binaries only flags they define. docs/operations.md must name every flag.
//
// Run after changing health/convoy-defaults.yaml:
//
//	go test ./config -run TestRulesCopy -update-rules
package config_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var updateRules = flag.Bool("update-rules", false, "copy health/convoy-defaults.yaml to config/rules/convoy-defaults.yaml")

const (
	// namespace is the namespace of config/default.
	namespace = "convoy-system"
	// rulesSource is the single source of the default rule set; rulesCopy is the copy
	// inside the kustomize root of config/rules (kustomize loads nothing outside it).
	rulesSource = "../health/convoy-defaults.yaml"
	rulesCopy   = "rules/convoy-defaults.yaml"
	// readerRoleLabel marks the one ClusterRole allowed to grant on every resource: the
	// unbound role of read identities.
	readerRoleLabel = "convoy.kumodo.io/rbac-scope"
	readerRoleValue = "read-identity"
)

// clusterScoped are the kinds rendered without a namespace; every other kind must be in
// the install namespace.
var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true,
	"ClusterRoleBinding": true, "APIService": true, "GlobalHealthRuleSet": true,
}

// object is one rendered resource: its YAML and its identity.
type object struct {
	kind, namespace, name string
	yaml                  []byte
	labels                map[string]string
	annotations           map[string]string
}

func (o *object) String() string {
	if o.namespace == "" {
		return o.kind + "/" + o.name
	}
	return o.kind + "/" + o.namespace + "/" + o.name
}

// decode unmarshals the object into a typed value.
func (o *object) decode(t *testing.T, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.yaml, into); err != nil {
		t.Fatalf("decoding %s: %v", o, err)
	}
}

// generic returns the object as a map.
func (o *object) generic(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(o.yaml, &m); err != nil {
		t.Fatalf("decoding %s: %v", o, err)
	}
	return m
}

type objects []*object

// render builds the kustomization in dir (relative to config/) like
// `kubectl kustomize dir`.
func render(t *testing.T, dir string) objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	var out objects
	for _, r := range m.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatalf("config/%s: %s as YAML: %v", dir, r.CurId(), err)
		}
		out = append(out, &object{
			kind: r.GetKind(), namespace: r.GetNamespace(), name: r.GetName(), yaml: data,
			labels: r.GetLabels(), annotations: r.GetAnnotations(),
		})
	}
	if len(out) == 0 {
		t.Fatalf("config/%s renders nothing", dir)
	}
	return out
}

// get returns the object kind/namespace/name or fails.
func (objs objects) get(t *testing.T, kind, namespace, name string) *object {
	t.Helper()
	for _, o := range objs {
		if o.kind == kind && o.namespace == namespace && o.name == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s rendered; the %ss are %v", kind, namespace, name, kind, objs.ofKind(kind))
	return nil
}

func (objs objects) ofKind(kind string) objects {
	var out objects
	for _, o := range objs {
		if o.kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (objs objects) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	objs.get(t, "Deployment", namespace, name).decode(t, d)
	return d
}

func TestRulesCopyIsByteIdentical(t *testing.T) {
	src, err := os.ReadFile(rulesSource)
	if err != nil {
		t.Fatal(err)
	}
	if *updateRules {
		if err := os.WriteFile(rulesCopy, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := os.ReadFile(rulesCopy)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(src, cp) {
		return
	}
	a, b := strings.Split(string(src), "\n"), strings.Split(string(cp), "\n")
	line := 0
	for line < len(a) && line < len(b) && a[line] == b[line] {
		line++
	}
	t.Fatalf("config/%s differs from health/convoy-defaults.yaml (first at line %d); the health/ file is the source: run\n"+
		"\tgo test ./config -run TestRulesCopy -update-rules", rulesCopy, line+1)
}

// TestDefault renders config/default and checks its objects one group at a time.
func TestDefault(t *testing.T) {
	objs := render(t, "default")

	t.Run("namespaces", func(t *testing.T) { checkNamespaces(t, objs) })

	t.Run("CRDs", func(t *testing.T) { checkCRDs(t, objs) })

	t.Run("default rule set", func(t *testing.T) { checkDefaultRuleSet(t, objs) })

	t.Run("observer RBAC", func(t *testing.T) { checkObserverRBAC(t, objs) })

	t.Run("api RBAC", func(t *testing.T) { checkAPIRBAC(t, objs) })

	t.Run("user roles", func(t *testing.T) { checkUserRoles(t, objs) })

	t.Run("observer Deployment", func(t *testing.T) { checkObserverDeployment(t, objs) })

	t.Run("api Deployment, Service and APIService", func(t *testing.T) { checkAPIDeployment(t, objs) })
}

// checkNamespaces checks every object is in the install namespace, except the cluster-scoped kinds and the one RoleBinding in kube-system.
func checkNamespaces(t *testing.T, objs objects) {
	objs.get(t, "Namespace", "", namespace)
	for _, o := range objs {
		switch {
		case o.kind == "RoleBinding" && o.namespace == "kube-system" && o.name == "convoy-api-auth-reader":
			// the one object in kube-system (config/rbac-kube-system)
		case clusterScoped[o.kind] && o.namespace != "":
			t.Errorf("%s is cluster-scoped but rendered with namespace %q", o, o.namespace)
		case !clusterScoped[o.kind] && o.namespace != namespace:
			t.Errorf("%s is not in namespace %s", o, namespace)
		}
	}
}

// checkCRDs checks the CRDs of both API groups are installed.
func checkCRDs(t *testing.T, objs objects) {
	crds := objs.ofKind("CustomResourceDefinition")
	var names []string
	for _, o := range crds {
		names = append(names, o.name)
	}
	sort.Strings(names)
	want := []string{
		"clusters.convoy.kumodo.io",
		"globalhealthrulesets.extensions.convoy.kumodo.io",
		"healthrulesets.extensions.convoy.kumodo.io",
		"releaseinventories.convoy.kumodo.io",
		"releases.convoy.kumodo.io",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("CRDs = %v, want %v", names, want)
	}
	// Rendered exactly as generated: no transformer may touch them.
	files, err := filepath.Glob("crd/bases/*.yaml")
	if err != nil || len(files) != len(want) {
		t.Fatalf("crd/bases holds %v (%v), want %d files", files, err, len(want))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var base map[string]any
		if err := yaml.Unmarshal(data, &base); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name, _, _ := strings.Cut(filepath.Base(f), ".yaml")
		parts := strings.SplitN(name, "_", 2) // <group>_<plural>.yaml
		got := objs.get(t, "CustomResourceDefinition", "", parts[1]+"."+parts[0]).generic(t)
		if !reflect.DeepEqual(got, base) {
			t.Errorf("the rendered CRD of %s differs from the file", f)
		}
	}
}

// checkDefaultRuleSet checks the default rule set is installed as health/convoy-defaults.yaml holds it.
func checkDefaultRuleSet(t *testing.T, objs objects) {
	data, err := os.ReadFile(rulesSource)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	got := objs.get(t, "GlobalHealthRuleSet", "", "convoy-defaults").generic(t)
	// kustomize re-emits YAML with go-yaml v3, which writes a folded scalar (>-) that
	// has a more-indented line with one blank line too many (as google/yamlfmt#69
	// reports): two ruleExpressions of convoy-defaults gain a "\n", whitespace
	// between CEL tokens. Nothing else may change.
	for _, path := range diffStrings(got, want, "") {
		t.Logf("kustomize adds blank lines to %s (whitespace only)", path)
	}
	if !reflect.DeepEqual(collapseNewlines(got), collapseNewlines(want)) {
		t.Errorf("the rendered GlobalHealthRuleSet convoy-defaults differs from %s", rulesSource)
	}
}
