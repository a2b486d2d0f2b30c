package config_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

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
