package chart

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"sigs.k8s.io/yaml"
)

const root = "../.."

var chartDir = filepath.Join(root, Dir)

// TestGenerated: the chart in the repository is what make chart writes from the kustomize
// bases now (a changed base without make chart fails here).
func TestGenerated(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(chartDir, path))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what make chart generates (%v): run make chart", path, err)
		}
	}
	for _, d := range []string{"templates", "crds"} {
		entries, err := os.ReadDir(filepath.Join(chartDir, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if _, ok := files[d+"/"+e.Name()]; !ok {
				t.Errorf("%s/%s is not generated any more: run make chart", d, e.Name())
			}
		}
	}
}

// TestLint: helm lint, with the default values and with every option on.
func TestLint(t *testing.T) {
	for _, values := range []map[string]any{nil, allOn()} {
		l := lint.RunAll(chartDir, values, Namespace)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint (values %v): %s", values, m)
			}
		}
	}
}

func allOn() map[string]any {
	return map[string]any{
		"namespace":   map[string]any{"create": true},
		"monitoring":  map[string]any{"enabled": true},
		"observer":    map[string]any{"unsafeReadAsObserver": true, "shards": []any{"", "eu"}},
		"tenantRoles": map[string]any{"enabled": true},
	}
}

// TestRendersKustomize: the chart renders what kustomize renders, object by object —
// with the defaults and namespace.create, config/default; with monitoring and
// unsafeReadAsObserver on, config/default, config/monitoring and
// config/unsafe-read-as-observer (and the observer's --unsafe-read-as-observer and its
// metrics on).
func TestRendersKustomize(t *testing.T) {
	base := kustomize(t, "default")
	got := render(t, map[string]any{"namespace": map[string]any{"create": true}}, Namespace)
	same(t, "config/default", got, base)

	want := append(slices.Clone(base), kustomize(t, "monitoring")...)
	want = append(want, kustomize(t, "unsafe-read-as-observer")...)
	// The observer's own changes: --unsafe-read-as-observer, and with monitoring, its
	// metrics on as docs/operations.md ("Monitoring") says to do by hand.
	for _, o := range want {
		if str(o, "kind") == "Deployment" && str(o, "metadata", "name") == "convoy-observer" {
			ctr := nested(o, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
			args := ctr["args"].([]any)
			args[slices.Index(args, any("--metrics-bind-address=0"))] = "--metrics-bind-address=:8080"
			ctr["args"] = append(args, "--unsafe-read-as-observer")
			ctr["ports"] = append(ctr["ports"].([]any), map[string]any{"containerPort": 8080, "name": "metrics", "protocol": "TCP"})
		}
	}
	got = render(t, map[string]any{"namespace": map[string]any{"create": true}, "monitoring": map[string]any{"enabled": true},
		"observer": map[string]any{"unsafeReadAsObserver": true}}, Namespace)
	same(t, "config/default+monitoring+unsafe-read-as-observer", got, want)

	// The defaults leave out the Namespace and keep the tenant roles.
	got = render(t, nil, Namespace)
	if find(got, "Namespace", Namespace) != nil || find(got, "ClusterRole", "convoy-tenant-edit") == nil || len(got) != len(base)-1 {
		t.Errorf("default values: %d objects, want config/default's %d without the Namespace", len(got), len(base))
	}
}

// TestValues: each value reaches the objects it names.
func TestValues(t *testing.T) {
	got := render(t, map[string]any{
		"observer": map[string]any{
			"image": "registry.example.com/convoy/convoy-observer@sha256:" + strings.Repeat("a", 64), "replicas": 3,
			"resources": map[string]any{"limits": map[string]any{"memory": "2Gi"}},
			"shards":    []any{"", "eu", "us"}, "defaultServiceAccount": "reader", "extraArgs": []any{"--workers=8"},
		},
		"api":         map[string]any{"image": "api:v1", "replicas": 1, "extraArgs": []any{"--v=2"}},
		"tenantRoles": map[string]any{"enabled": false},
	}, "platform")
	for _, o := range got {
		if ns := str(o, "metadata", "namespace"); ns != "" && ns != "platform" && ns != "kube-system" {
			t.Errorf("%s %s in namespace %s, want the release's", str(o, "kind"), str(o, "metadata", "name"), ns)
		}
	}
	if find(got, "ClusterRole", "convoy-tenant-edit") != nil || find(got, "ClusterRole", "convoy-tenant-view") != nil {
		t.Error("tenantRoles.enabled=false still renders the tenant roles")
	}
	selectors := map[string]bool{}
	for _, shard := range []string{"", "eu", "us"} {
		name := "convoy-observer"
		label := "default"
		if shard != "" {
			name, label = name+"-"+shard, shard
		}
		d := find(got, "Deployment", name)
		if d == nil || find(got, "PodDisruptionBudget", name) == nil {
			t.Fatalf("shard %q: no Deployment and PodDisruptionBudget %s", shard, name)
		}
		sel := fmt.Sprint(nested(d, "spec", "selector", "matchLabels"))
		if str(d, "spec", "selector", "matchLabels", "convoy.kumodo.io/shard") != label || selectors[sel] {
			t.Errorf("shard %q: selector %s, want its own with convoy.kumodo.io/shard=%s", shard, sel, label)
		}
		selectors[sel] = true
		ctr := nested(d, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
		args := fmt.Sprint(ctr["args"])
		wantShard := shard != "" && strings.Contains(args, "--shard="+shard)
		if (shard != "") != wantShard || !strings.Contains(args, "--default-service-account=reader") || !strings.Contains(args, "--workers=8") ||
			strings.Contains(args, "--unsafe-read-as-observer") {
			t.Errorf("shard %q: args %s", shard, args)
		}
		if !strings.HasSuffix(fmt.Sprint(ctr["image"]), strings.Repeat("a", 64)) || fmt.Sprint(nested(d, "spec", "replicas")) != "3" ||
			fmt.Sprint(nested(ctr, "resources", "limits", "memory")) != "2Gi" {
			t.Errorf("shard %q: image %v, replicas %v, resources %v", shard, ctr["image"], nested(d, "spec", "replicas"), ctr["resources"])
		}
	}
	api := find(got, "Deployment", "convoy-api")
	ctr := nested(api, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	if ctr["image"] != "api:v1" || fmt.Sprint(nested(api, "spec", "replicas")) != "1" || !strings.Contains(fmt.Sprint(ctr["args"]), "--v=2") {
		t.Errorf("convoy-api: image %v, replicas %v, args %v", ctr["image"], nested(api, "spec", "replicas"), ctr["args"])
	}
}

func kustomize(t *testing.T, base string) []map[string]any {
	t.Helper()
	objs, err := Kustomize(filepath.Join(root, "config", base))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func render(t *testing.T, values map[string]any, namespace string) []map[string]any {
	t.Helper()
	objs, err := Render(chartDir, values, namespace)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objs {
		if str(o, "kind") == kind && str(o, "metadata", "name") == name {
			return o
		}
	}
	return nil
}

// same compares two sets of objects by kind, namespace and name, and each object's
// content as JSON values (so 2 and 2.0 are equal, as they are to the API server).
func same(t *testing.T, what string, got, want []map[string]any) {
	t.Helper()
	key := func(o map[string]any) string {
		return str(o, "kind") + " " + str(o, "metadata", "namespace") + "/" + str(o, "metadata", "name")
	}
	index := func(objs []map[string]any) map[string]any {
		m := map[string]any{}
		for _, o := range objs {
			data, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := yaml.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			if _, dup := m[key(o)]; dup {
				t.Errorf("%s: %s twice", what, key(o))
			}
			m[key(o)] = v
		}
		return m
	}
	g, w := index(got), index(want)
	for k, wv := range w {
		gv, ok := g[k]
		switch {
		case !ok:
			t.Errorf("%s: the chart does not render %s", what, k)
		case !reflect.DeepEqual(gv, wv):
			gy, _ := yaml.Marshal(gv)
			wy, _ := yaml.Marshal(wv)
			t.Errorf("%s: %s differs; chart:\n%s\nkustomize:\n%s", what, k, gy, wy)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: the chart renders %s, kustomize does not", what, k)
		}
	}
}

// TestValuesRefused: values.schema.json refuses values that would render objects that
// collide, mistype or fail at install, with an error that names the value.
func TestValuesRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"shard default":        {map[string]any{"observer": map[string]any{"shards": []any{"", "default"}}}, "shards"},
		"repeated shard":       {map[string]any{"observer": map[string]any{"shards": []any{"eu", "eu"}}}, "shards"},
		"no shard":             {map[string]any{"observer": map[string]any{"shards": []any{}}}, "shards"},
		"shard not a label":    {map[string]any{"observer": map[string]any{"shards": []any{"eu #x"}}}, "shards"},
		"shard upper case":     {map[string]any{"observer": map[string]any{"shards": []any{"EU"}}}, "shards"},
		"shard a number":       {map[string]any{"observer": map[string]any{"shards": []any{0}}}, "shards"},
		"quoted boolean":       {map[string]any{"observer": map[string]any{"unsafeReadAsObserver": "false"}}, "unsafeReadAsObserver"},
		"replicas a word":      {map[string]any{"api": map[string]any{"replicas": "two"}}, "replicas"},
		"argument not string":  {map[string]any{"observer": map[string]any{"extraArgs": []any{map[string]any{"a": 1}}}}, "extraArgs"},
		"service account yaml": {map[string]any{"observer": map[string]any{"defaultServiceAccount": "a: b"}}, "defaultServiceAccount"},
		"unknown value":        {map[string]any{"observer": map[string]any{"shard": []any{"eu"}}}, "shard"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(chartDir, tc.values, Namespace)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
