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
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kumodo/convoy-observer/internal/syncapi/apiserver"
)

var updateRules = flag.Bool("update-rules", false, "copy health/convoy-defaults.yaml to config/rules/convoy-defaults.yaml")

const (
	// namespace is the namespace of config/default.
	namespace = "convoy-system"
	// rulesSource is the single source of the default rule set; rulesCopy is the copy
	// inside the kustomize root of config/rules (kustomize loads nothing outside it).
	rulesSource = "../health/convoy-defaults.yaml"
	rulesCopy   = "rules/convoy-defaults.yaml"
	// localReaderLabel marks the one ClusterRole allowed to grant get on every resource.
	localReaderLabel = "convoy.kumodo.io/rbac-scope"
	localReaderValue = "local-cluster-targets"
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

	t.Run("namespaces", func(t *testing.T) {
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
	})

	t.Run("CRDs", func(t *testing.T) {
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
	})

	t.Run("default rule set", func(t *testing.T) {
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
	})

	t.Run("observer RBAC", func(t *testing.T) {
		got := grantsOf(t, objs, namespace, "convoy-observer")
		want := grantSet{}
		want.add("", "convoy.kumodo.io", []string{"releases"}, "get", "list", "watch")
		want.add("", "convoy.kumodo.io", []string{"clusters"}, "list", "watch") // cache only, no GET (test/install)
		want.add("", "convoy.kumodo.io", []string{"releases/status"}, "patch")
		want.add("", "convoy.kumodo.io", []string{"releaseinventories"}, "list", "watch", "patch")
		want.add("", "extensions.convoy.kumodo.io", []string{"globalhealthrulesets", "healthrulesets"}, "list", "watch")
		want.add("", "", []string{"secrets"}, "get", "list", "watch")
		want.add("", "events.k8s.io", []string{"events"}, "create", "patch") // Events on Releases and Clusters
		want.add("", "*", []string{"*"}, "get")                              // the local-cluster reader, checked below
		// The local-cluster watcher: list and watch of common workload kinds, never Secrets.
		want.add("", "", []string{"pods", "services", "configmaps", "persistentvolumeclaims", "persistentvolumes"}, "list", "watch")
		want.add("", "apps", []string{"deployments", "statefulsets", "daemonsets"}, "list", "watch")
		want.add("", "batch", []string{"jobs"}, "list", "watch")
		want.add("", "networking.k8s.io", []string{"ingresses"}, "list", "watch")
		want.add(namespace, "coordination.k8s.io", []string{"leases"}, "get", "create", "update")
		want.add(namespace, "", []string{"events"}, "create", "patch")
		want.add(namespace, "events.k8s.io", []string{"events"}, "create", "patch")
		want.add("", "subresources.convoy.kumodo.io", []string{"releases/sync"}, "create") // wake-ups
		got.mustEqual(t, want)

		// Spelled out, though mustEqual implies them.
		for g := range got {
			switch {
			case g.verb == "*" || g.resource == "*" && g.verb != "get":
				t.Errorf("wildcard grant %v", g)
			case g.resource == "releases" && g.verb != "get" && g.verb != "list" && g.verb != "watch":
				t.Errorf("the observer must not %s releases (it writes only releases/status)", g.verb)
			case g.resource == "releaseinventories" && slices.Contains([]string{"create", "update", "delete", "deletecollection"}, g.verb):
				t.Errorf("the observer must not %s releaseinventories (Server-Side Apply is patch)", g.verb)
			case g.resource == "secrets" && g.verb != "get" && g.verb != "list" && g.verb != "watch":
				t.Errorf("the observer must not %s secrets (it watches each kubeconfig Secret by name)", g.verb)
			}
		}

		// get on every resource only through the clearly labelled local-cluster reader.
		for _, o := range objs.ofKind("ClusterRole") {
			var cr rbacv1.ClusterRole
			o.decode(t, &cr)
			wide := false
			for _, r := range cr.Rules {
				wide = wide || slices.Contains(r.APIGroups, "*") || slices.Contains(r.Resources, "*")
			}
			if !wide {
				continue
			}
			if cr.Labels[localReaderLabel] != localReaderValue {
				t.Errorf("ClusterRole %s grants on every resource but lacks the label %s=%s", cr.Name, localReaderLabel, localReaderValue)
			}
			want := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get"}}}
			if !reflect.DeepEqual(cr.Rules, want) {
				t.Errorf("ClusterRole %s rules = %+v, want only get on every resource", cr.Name, cr.Rules)
			}
		}
	})

	t.Run("api RBAC", func(t *testing.T) {
		got := grantsOf(t, objs, namespace, "convoy-api")
		want := grantSet{}
		want.add("", "convoy.kumodo.io", []string{"releases"}, "get", "list", "watch", "patch")
		want.add("", "convoy.kumodo.io", []string{"releaseinventories"}, "get", "list", "watch")
		// The decidedBy of /health: the Release's rules, Cluster and target objects.
		want.add("", "convoy.kumodo.io", []string{"clusters"}, "get")
		want.add("", "extensions.convoy.kumodo.io", []string{"globalhealthrulesets", "healthrulesets"}, "list")
		want.add("", "", []string{"secrets"}, "get")
		want.add("", "*", []string{"*"}, "get") // the local-cluster reader, optional
		// Delegated authentication and authorization (built-in roles).
		want.add("", "authentication.k8s.io", []string{"tokenreviews"}, "create")
		want.add("", "authorization.k8s.io", []string{"subjectaccessreviews"}, "create")
		want.add("kube-system", "", []string{"configmaps/extension-apiserver-authentication"}, "get", "list", "watch")
		got.mustEqual(t, want)

		// The subject of the kube-system RoleBinding follows the install namespace.
		var rb rbacv1.RoleBinding
		objs.get(t, "RoleBinding", "kube-system", "convoy-api-auth-reader").decode(t, &rb)
		if len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != namespace {
			t.Errorf("RoleBinding kube-system/convoy-api-auth-reader subjects = %+v, want the ServiceAccount in %s", rb.Subjects, namespace)
		}
	})

	t.Run("user roles", func(t *testing.T) {
		for name, want := range map[string]rbacv1.PolicyRule{
			"convoy-release-sync":          {APIGroups: []string{"subresources.convoy.kumodo.io"}, Resources: []string{"releases/sync"}, Verbs: []string{"create"}},
			"convoy-release-health-reader": {APIGroups: []string{"subresources.convoy.kumodo.io"}, Resources: []string{"releases/health"}, Verbs: []string{"get"}},
		} {
			var cr rbacv1.ClusterRole
			objs.get(t, "ClusterRole", "", name).decode(t, &cr)
			if !reflect.DeepEqual(cr.Rules, []rbacv1.PolicyRule{want}) {
				t.Errorf("ClusterRole %s rules = %+v, want %+v", name, cr.Rules, want)
			}
		}
	})

	t.Run("observer Deployment", func(t *testing.T) {
		d := objs.deployment(t, "convoy-observer")
		c := checkPod(t, d, "convoy-observer", "convoy-observer:latest")
		args := checkArgs(t, "convoy-observer", observerFlags(t), d, c)
		if args["leader-elect"] != "true" {
			t.Errorf("--leader-elect = %q, want true", args["leader-elect"])
		}
		if got := args["leader-election-namespace"]; got != namespace {
			t.Errorf("--leader-election-namespace = %q, want %q", got, namespace)
		}
		if _, ok := args["shard"]; ok {
			t.Errorf("the default shard's Deployment passes --shard=%s", args["shard"])
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
		}
		checkProbes(t, c, args["health-probe-bind-address"], corev1.URISchemeHTTP, "/healthz", "/readyz")

		// Wake-ups go through the kube-apiserver (the APIService): no direct URL, no CA.
		if _, ok := args["sync-url"]; ok {
			t.Errorf("--sync-url = %q: the observer should wake through the kube-apiserver", args["sync-url"])
		}
		if _, ok := args["disable-sync"]; ok {
			t.Error("--disable-sync is set")
		}

		var pdb policyv1.PodDisruptionBudget
		objs.get(t, "PodDisruptionBudget", namespace, "convoy-observer").decode(t, &pdb)
		checkSelects(t, pdb.Spec.Selector, d)
	})

	t.Run("api Deployment, Service and APIService", func(t *testing.T) {
		d := objs.deployment(t, "convoy-api")
		c := checkPod(t, d, "convoy-api", "convoy-api:latest")
		args := checkArgs(t, "convoy-api", apiFlags(t), d, c)
		cert := certificate(t, objs, "convoy-api-serving")
		if got, want := args["tls-cert-file"], secretFile(t, d, c, cert.secretName, "tls.crt"); got != want {
			t.Errorf("--tls-cert-file = %q, want %q (Secret %s)", got, want, cert.secretName)
		}
		if got, want := args["tls-private-key-file"], secretFile(t, d, c, cert.secretName, "tls.key"); got != want {
			t.Errorf("--tls-private-key-file = %q, want %q (Secret %s)", got, want, cert.secretName)
		}
		if _, ok := args["bind-address"]; ok {
			t.Errorf("--bind-address = %q: convoy-api should listen on every address of the pod", args["bind-address"])
		}
		port := checkProbes(t, c, ":"+args["secure-port"], corev1.URISchemeHTTPS, "/livez", "/readyz")
		if _, ok := args["kubeconfig"]; ok {
			t.Error("--kubeconfig is set: in the cluster, convoy-api uses its ServiceAccount")
		}

		var svc corev1.Service
		objs.get(t, "Service", namespace, "convoy-api").decode(t, &svc)
		if len(svc.Spec.Ports) != 1 {
			t.Fatalf("Service convoy-api ports = %+v, want one", svc.Spec.Ports)
		}
		if tp := svc.Spec.Ports[0].TargetPort; tp.String() != port.Name && tp.IntValue() != int(port.ContainerPort) {
			t.Errorf("Service targetPort %s is not the container port %s/%d", tp.String(), port.Name, port.ContainerPort)
		}
		checkSelects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, d)

		as := objs.get(t, "APIService", "", "v1alpha1.subresources.convoy.kumodo.io")
		var apiService struct {
			Spec struct {
				Group, Version        string
				InsecureSkipTLSVerify bool
				CABundle              []byte
				Service               struct {
					Name, Namespace string
					Port            int32
				}
			}
		}
		if err := yaml.Unmarshal(as.yaml, &apiService); err != nil {
			t.Fatal(err)
		}
		s := apiService.Spec
		if s.Group != "subresources.convoy.kumodo.io" || s.Version != "v1alpha1" {
			t.Errorf("APIService group/version = %s/%s", s.Group, s.Version)
		}
		if s.Service.Name != svc.Name || s.Service.Namespace != svc.Namespace || s.Service.Port != svc.Spec.Ports[0].Port {
			t.Errorf("APIService service = %+v, want %s/%s:%d", s.Service, svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
		}
		if s.InsecureSkipTLSVerify {
			t.Error("APIService skips TLS verification")
		}
		if got, want := as.annotations["cert-manager.io/inject-ca-from"], namespace+"/convoy-api-serving"; got != want {
			t.Errorf("APIService CA injection from %q, want %q", got, want)
		}

		var pdb policyv1.PodDisruptionBudget
		objs.get(t, "PodDisruptionBudget", namespace, "convoy-api").decode(t, &pdb)
		checkSelects(t, pdb.Spec.Selector, d)
	})
}

// TestSamples renders every overlay under config/samples: each observer Deployment in it
// is a further shard of config/default's, with its own --shard and pods no other
// Deployment selects.
func TestSamples(t *testing.T) {
	dirs, err := filepath.Glob("samples/*/kustomization.yaml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no samples (%v)", err)
	}
	base := render(t, "default")
	flags := observerFlags(t)
	for _, k := range dirs {
		dir := filepath.Dir(k)
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			deployments := objs.ofKind("Deployment")
			if len(deployments) == 0 {
				t.Fatal("renders no Deployment")
			}
			all := append(base.ofKind("Deployment"), deployments...)
			shards := map[string]string{"": "convoy-observer"}
			for _, o := range objs {
				if !clusterScoped[o.kind] && o.namespace != namespace {
					t.Errorf("%s is not in namespace %s", o, namespace)
				}
				if base.has(o) {
					t.Errorf("%s is also rendered by config/default", o)
				}
			}
			for _, o := range deployments {
				d := &appsv1.Deployment{}
				o.decode(t, d)
				c := checkPod(t, d, "convoy-observer", "convoy-observer:latest")
				args := checkArgs(t, "convoy-observer", flags, d, c)
				shard, ok := args["shard"]
				if !ok || shard == "" {
					t.Errorf("Deployment %s has no --shard", d.Name)
				}
				if other, dup := shards[shard]; dup {
					t.Errorf("Deployments %s and %s both serve shard %q", other, d.Name, shard)
				}
				shards[shard] = d.Name
				if d.Labels["convoy.kumodo.io/shard"] != shard || d.Spec.Selector.MatchLabels["convoy.kumodo.io/shard"] != shard {
					t.Errorf("Deployment %s: shard label %q, selector %v, want shard %q", d.Name, d.Labels["convoy.kumodo.io/shard"], d.Spec.Selector.MatchLabels, shard)
				}
				checkProbes(t, c, args["health-probe-bind-address"], corev1.URISchemeHTTP, "/healthz", "/readyz")
				// No two Deployments may select each other's pods.
				for _, p := range all {
					if p == o || p.name == "convoy-api" {
						continue
					}
					other := &appsv1.Deployment{}
					p.decode(t, other)
					sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
					if err != nil {
						t.Fatal(err)
					}
					if sel.Matches(labels.Set(other.Spec.Template.Labels)) {
						t.Errorf("the selector of %s matches the pods of %s", d.Name, other.Name)
					}
					osel, _ := metav1.LabelSelectorAsSelector(other.Spec.Selector)
					if osel.Matches(labels.Set(d.Spec.Template.Labels)) {
						t.Errorf("the selector of %s matches the pods of %s", other.Name, d.Name)
					}
				}
				for _, p := range objs.ofKind("PodDisruptionBudget") {
					var pdb policyv1.PodDisruptionBudget
					p.decode(t, &pdb)
					if pdb.Name == d.Name {
						checkSelects(t, pdb.Spec.Selector, d)
					}
				}
			}
		})
	}
}

func (objs objects) has(o *object) bool {
	for _, p := range objs {
		if p.kind == o.kind && p.namespace == o.namespace && p.name == o.name {
			return true
		}
	}
	return false
}

// TestDocsNameEveryFlag keeps docs/operations.md in step with the flags of both binaries.
func TestDocsNameEveryFlag(t *testing.T) {
	data, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for bin, flags := range map[string]*flag.FlagSet{"convoy-observer": observerFlags(t), "convoy-api": apiFlags(t)} {
		flags.VisitAll(func(f *flag.Flag) {
			if !regexp.MustCompile(`(^|[^\w-])--` + regexp.QuoteMeta(f.Name) + `([^\w-]|$)`).MatchString(doc) {
				t.Errorf("docs/operations.md does not name --%s of %s", f.Name, bin)
			}
		})
	}
}

// collapseNewlines returns v with every run of newlines in its strings cut to one.
func collapseNewlines(v any) any {
	switch v := v.(type) {
	case string:
		return regexp.MustCompile(`\n+`).ReplaceAllString(v, "\n")
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = collapseNewlines(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = collapseNewlines(e)
		}
		return out
	}
	return v
}

// diffStrings lists the paths of the strings that differ between a and b.
func diffStrings(a, b any, path string) []string {
	switch a := a.(type) {
	case string:
		if s, ok := b.(string); ok && s != a {
			return []string{path}
		}
	case map[string]any:
		if m, ok := b.(map[string]any); ok {
			var out []string
			for k := range a {
				out = append(out, diffStrings(a[k], m[k], path+"."+k)...)
			}
			sort.Strings(out)
			return out
		}
	case []any:
		if l, ok := b.([]any); ok {
			var out []string
			for i := range min(len(a), len(l)) {
				out = append(out, diffStrings(a[i], l[i], fmt.Sprintf("%s[%d]", path, i))...)
			}
			return out
		}
	}
	return nil
}

// ---- RBAC ----

// grant is one permission: scope "" is cluster-wide, else the namespace of a RoleBinding.
type grant struct {
	scope, group, resource, verb string
}

type grantSet map[grant]bool

func (s grantSet) add(scope, group string, resources []string, verbs ...string) {
	for _, r := range resources {
		for _, v := range verbs {
			s[grant{scope, group, r, v}] = true
		}
	}
}

func (s grantSet) mustEqual(t *testing.T, want grantSet) {
	t.Helper()
	var extra, missing []string
	for g := range s {
		if !want[g] {
			extra = append(extra, fmt.Sprintf("%+v", g))
		}
	}
	for g := range want {
		if !s[g] {
			missing = append(missing, fmt.Sprintf("%+v", g))
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	for _, g := range extra {
		t.Errorf("grants more than documented: %s", g)
	}
	for _, g := range missing {
		t.Errorf("lacks %s", g)
	}
}

// builtinRoles are the rules of the Kubernetes bootstrap roles that the manifests bind,
// by kind/namespace/name: they are not rendered.
var builtinRoles = map[string][]rbacv1.PolicyRule{
	"ClusterRole//system:auth-delegator": {
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	},
	"Role/kube-system/extension-apiserver-authentication-reader": {
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"extension-apiserver-authentication"}, Verbs: []string{"get", "list", "watch"}},
	},
}

// grantsOf collects what the rendered bindings grant the ServiceAccount namespace/name.
// Every roleRef must resolve to a rendered role; resourceNames are not used.
func grantsOf(t *testing.T, objs objects, saNamespace, saName string) grantSet {
	t.Helper()
	out := grantSet{}
	bound := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == saName && s.Namespace == saNamespace {
				return true
			}
		}
		return false
	}
	objs.get(t, "ServiceAccount", saNamespace, saName)
	addRules := func(scope string, rules []rbacv1.PolicyRule, role string) {
		for _, r := range rules {
			if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 1 || len(r.ResourceNames) == 1 && len(r.Resources) != 1 {
				t.Errorf("%s: rule %+v uses nonResourceURLs or several resourceNames", role, r)
			}
			if len(r.ResourceNames) == 1 { // counted as the grant on resource/name
				r.Resources = []string{r.Resources[0] + "/" + r.ResourceNames[0]}
			}
			for _, g := range r.APIGroups {
				out.add(scope, g, r.Resources, r.Verbs...)
			}
		}
	}
	roleRules := func(kind, ns, name string) []rbacv1.PolicyRule {
		if rules, ok := builtinRoles[kind+"/"+ns+"/"+name]; ok {
			return rules
		}
		var role rbacv1.ClusterRole // Role has the same shape (rules)
		objs.get(t, kind, ns, name).decode(t, &role)
		return role.Rules
	}
	for _, o := range objs.ofKind("ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		o.decode(t, &b)
		if bound(b.Subjects) {
			if b.RoleRef.Kind != "ClusterRole" {
				t.Fatalf("%s: roleRef %+v", o, b.RoleRef)
			}
			addRules("", roleRules("ClusterRole", "", b.RoleRef.Name), b.RoleRef.Name)
		}
	}
	for _, o := range objs.ofKind("RoleBinding") {
		var b rbacv1.RoleBinding
		o.decode(t, &b)
		if !bound(b.Subjects) {
			continue
		}
		switch b.RoleRef.Kind {
		case "Role":
			addRules(b.Namespace, roleRules("Role", b.Namespace, b.RoleRef.Name), b.RoleRef.Name)
		case "ClusterRole":
			addRules(b.Namespace, roleRules("ClusterRole", "", b.RoleRef.Name), b.RoleRef.Name)
		default:
			t.Fatalf("%s: roleRef %+v", o, b.RoleRef)
		}
	}
	return out
}

// ---- pods ----

// checkPod checks the pod template of d: its ServiceAccount, one container with image,
// and the restricted security settings. It returns the container.
func checkPod(t *testing.T, d *appsv1.Deployment, serviceAccount, image string) *corev1.Container {
	t.Helper()
	p := d.Spec.Template.Spec
	if p.ServiceAccountName != serviceAccount {
		t.Errorf("%s: serviceAccountName = %q, want %q", d.Name, p.ServiceAccountName, serviceAccount)
	}
	if len(p.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", d.Name, len(p.Containers))
	}
	c := &p.Containers[0]
	if c.Image != image {
		t.Errorf("%s: image = %q, want %q", d.Name, c.Image, image)
	}
	psc, sc := p.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Errorf("%s: pod securityContext.runAsNonRoot is not true", d.Name)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: pod seccompProfile is not RuntimeDefault", d.Name)
	case sc == nil:
		t.Fatalf("%s: no container securityContext", d.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: readOnlyRootFilesystem is not true", d.Name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation is not false", d.Name)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: capabilities = %+v, want drop [ALL] and no add", d.Name, sc.Capabilities)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: resources = %+v, want cpu and memory requests and a memory limit", d.Name, c.Resources)
	}
	return c
}

// checkArgs parses the container's args with a flag set that mirrors the binary's (after
// expanding $(VAR) from the container's env as the kubelet does) and returns the values
// that the args set, by flag name.
func checkArgs(t *testing.T, bin string, defs *flag.FlagSet, d *appsv1.Deployment, c *corev1.Container) map[string]string {
	t.Helper()
	if len(c.Command) > 0 {
		t.Errorf("%s: command %v overrides the image's entrypoint", d.Name, c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = d.Namespace
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = ref.ReplaceAllStringFunc(a, func(m string) string {
			v, ok := env[m[2:len(m)-1]]
			if !ok {
				t.Errorf("%s: arg %q refers to %s, which the container's env does not define", d.Name, a, m)
			}
			return v
		})
	}
	fs := flag.NewFlagSet(bin, flag.ContinueOnError)
	var errBuf bytes.Buffer
	fs.SetOutput(&errBuf)
	defs.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s: %s does not accept the args %q: %v", d.Name, bin, args, err)
	}
	if fs.NArg() > 0 {
		t.Errorf("%s: %s takes no arguments, got %q", d.Name, bin, fs.Args())
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	return set
}

// checkProbes checks that the liveness and readiness probes GET the given paths with
// scheme on the container port that addr (a --…-bind-address) listens on, and returns
// that port.
func checkProbes(t *testing.T, c *corev1.Container, addr string, scheme corev1.URIScheme, live, ready string) corev1.ContainerPort {
	t.Helper()
	_, p, ok := strings.Cut(addr, ":")
	portNum, err := strconv.Atoi(p)
	if !ok || err != nil {
		t.Fatalf("%s: bind address %q has no port", c.Name, addr)
	}
	var port *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].ContainerPort == int32(portNum) {
			port = &c.Ports[i]
		}
	}
	if port == nil {
		t.Fatalf("%s: no container port %d", c.Name, portNum)
	}
	for _, pr := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, live}, {"readiness", c.ReadinessProbe, ready}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", c.Name, pr.what)
			continue
		}
		g := pr.probe.HTTPGet
		s := g.Scheme
		if s == "" {
			s = corev1.URISchemeHTTP
		}
		if g.Path != pr.path || s != scheme || (g.Port.String() != port.Name && g.Port.IntValue() != portNum) {
			t.Errorf("%s: %s probe %s %s port %s, want %s %s port %d", c.Name, pr.what, s, g.Path, g.Port.String(), scheme, pr.path, portNum)
		}
	}
	return *port
}

// checkSelects checks that sel selects d's pods and that d's own selector does too.
func checkSelects(t *testing.T, sel *metav1.LabelSelector, d *appsv1.Deployment) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() || !s.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select the pods of %s (labels %v): %v", sel, d.Name, d.Spec.Template.Labels, err)
	}
	own, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !own.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%s: its selector does not match its own pods", d.Name)
	}
}

// secretFile returns the path at which container c of d sees key of Secret secret.
func secretFile(t *testing.T, d *appsv1.Deployment, c *corev1.Container, secret, key string) string {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secret {
			continue
		}
		file := key
		if len(v.Secret.Items) > 0 {
			file = ""
			for _, it := range v.Secret.Items {
				if it.Key == key {
					file = it.Path
				}
			}
			if file == "" {
				continue
			}
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && m.SubPath == "" {
				return m.MountPath + "/" + file
			}
		}
	}
	t.Errorf("%s: container %s does not mount key %s of Secret %s", d.Name, c.Name, key, secret)
	return ""
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

type cert struct {
	secretName string
	dnsNames   []string
}

// certificate returns the cert-manager Certificate name of the install namespace.
func certificate(t *testing.T, objs objects, name string) cert {
	t.Helper()
	var c struct {
		Spec struct {
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(objs.get(t, "Certificate", namespace, name).yaml, &c); err != nil {
		t.Fatal(err)
	}
	return cert{secretName: c.Spec.SecretName, dnsNames: c.Spec.DNSNames}
}

// ---- flags of the binaries ----

// observerFlags mirrors the flags of cmd/convoy-observer: those its source defines, the
// zap logging flags when it binds them, and --kubeconfig, which controller-runtime
// registers on flag.CommandLine when the command loads its config with GetConfig.
func observerFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	fs, calls := sourceFlags(t, "../cmd/convoy-observer")
	if calls["BindFlags"] {
		(&zap.Options{}).BindFlags(fs)
	}
	if calls["GetConfig"] || calls["GetConfigOrDie"] {
		fs.String("kubeconfig", "", "controller-runtime")
	}
	for _, want := range []string{"sync-url", "shard", "leader-elect", "health-probe-bind-address"} {
		if fs.Lookup(want) == nil {
			t.Fatalf("found no --%s in cmd/convoy-observer: the source scan is broken", want)
		}
	}
	return fs
}

// apiFlags mirrors the flags of cmd/convoy-api: the options of
// internal/syncapi/apiserver (k8s.io/apiserver's serving, authentication and
// authorization flags) and --v.
func apiFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	pfs := pflag.NewFlagSet("convoy-api", pflag.ContinueOnError)
	apiserver.NewOptions().AddFlags(pfs)
	fs := flag.NewFlagSet("convoy-api", flag.ContinueOnError)
	pfs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			fs.Bool(f.Name, false, f.Usage)
		} else {
			fs.String(f.Name, "", f.Usage)
		}
	})
	fs.Int("v", 0, "log verbosity")
	for _, want := range []string{"kubeconfig", "secure-port", "tls-cert-file", "tls-private-key-file", "authentication-kubeconfig", "authorization-kubeconfig"} {
		if fs.Lookup(want) == nil {
			t.Fatalf("convoy-api has no --%s", want)
		}
	}
	return fs
}

// sourceFlags scans the non-test Go files of dir for flag definitions — calls such as
// fs.StringVar(&v, "name", …), fs.Var(&v, "name", …) or flag.Duration("name", …) — and
// returns a flag set with flags of the same names and types (a Var is a string), plus
// the names of every method or function the source calls.
func sourceFlags(t *testing.T, dir string) (*flag.FlagSet, map[string]bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet(dir, flag.ContinueOnError)
	calls := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			method := sel.Sel.Name
			calls[method] = true
			typ, nameArg := strings.TrimSuffix(method, "Var"), 0
			if typ != method {
				nameArg = 1
			}
			define := map[string]func(string){
				"String":   func(n string) { fs.String(n, "", "") },
				"Bool":     func(n string) { fs.Bool(n, false, "") },
				"Int":      func(n string) { fs.Int(n, 0, "") },
				"Int64":    func(n string) { fs.Int64(n, 0, "") },
				"Uint":     func(n string) { fs.Uint(n, 0, "") },
				"Uint64":   func(n string) { fs.Uint64(n, 0, "") },
				"Float64":  func(n string) { fs.Float64(n, 0, "") },
				"Duration": func(n string) { fs.Duration(n, 0, "") },
				"":         func(n string) { fs.String(n, "", "") }, // Var: a flag.Value
				"Func":     func(n string) { fs.String(n, "", "") },
				"Text":     func(n string) { fs.String(n, "", "") },
			}[typ]
			if define == nil || len(call.Args) <= nameArg {
				return true
			}
			lit, ok := call.Args[nameArg].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, err := strconv.Unquote(lit.Value)
			if err != nil || name == "" || fs.Lookup(name) != nil {
				return true
			}
			define(name)
			return true
		})
	}
	return fs, calls
}
