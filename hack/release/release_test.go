package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kumodo/convoy-observer/hack/chart"
)

// TestWrite renders the release from a digests file as make images writes it: every
// image of install.yaml is pinned to REGISTRY/NAME@DIGEST (no tag, no placeholder), every
// object carries the version label, and the rule library is there.
func TestWrite(t *testing.T) {
	imgs, out := t.TempDir(), t.TempDir()
	digest := map[string]string{
		"convoy-observer": "sha256:" + strings.Repeat("a", 64),
		"convoy-api":      "sha256:" + strings.Repeat("b", 64),
	}
	var lines string
	for n, d := range digest {
		lines += n + "@" + d + "\n"
	}
	if err := os.WriteFile(filepath.Join(imgs, "digests"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write("../..", imgs, "registry.example.com/convoy", "v9.8.7", out); err != nil {
		t.Fatal(err)
	}
	install, err := os.ReadFile(filepath.Join(out, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`(?m)^\s+image: (\S+)$`).FindAllStringSubmatch(string(install), -1)
	seen := map[string]bool{}
	for _, m := range got {
		seen[m[1]] = true
	}
	want := map[string]bool{}
	for n, d := range digest {
		want["registry.example.com/convoy/"+n+"@"+d] = true
	}
	if len(seen) != len(want) {
		t.Errorf("images %v, want exactly %v", seen, want)
	}
	for w := range want {
		if !seen[w] {
			t.Errorf("install.yaml has no image %s (has %v)", w, seen)
		}
	}
	docs := strings.Count(string(install), "\n---\n") + 1
	if labels := strings.Count(string(install), "app.kubernetes.io/version: v9.8.7"); labels < docs {
		t.Errorf("%d version labels for %d objects", labels, docs)
	}
	for _, s := range []string{"kind: CustomResourceDefinition", "kind: APIService", "name: convoy-defaults", "namespace: convoy-system"} {
		if !strings.Contains(string(install), s) {
			t.Errorf("install.yaml lacks %q", s)
		}
	}
	lib, err := os.ReadFile(filepath.Join(out, "rules-library.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(lib), "kind: GlobalHealthRuleSet"); n < 10 {
		t.Errorf("rules-library.yaml holds %d GlobalHealthRuleSets, want the library", n)
	}

	// The packaged chart: its version, and the same pinned images as install.yaml.
	objs, err := chart.Render(filepath.Join(out, "convoy-observer-9.8.7.tgz"), nil, "convoy-system")
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]bool{}
	for _, o := range objs {
		if o["kind"] != "Deployment" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o, "spec", "template", "spec", "containers")
		for _, c := range cs {
			images[c.(map[string]any)["image"].(string)] = true
		}
	}
	if len(images) != len(want) {
		t.Errorf("chart images %v, want exactly %v", images, want)
	}
	for w := range want {
		if !images[w] {
			t.Errorf("the chart has no image %s (has %v)", w, images)
		}
	}
	ch, err := loader.Load(filepath.Join(out, "convoy-observer-9.8.7.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "9.8.7" || ch.Metadata.AppVersion != "v9.8.7" {
		t.Errorf("chart version %s, appVersion %s; want 9.8.7 and v9.8.7", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
}

func TestReadDigestsRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"missing image": "convoy-observer@sha256:" + strings.Repeat("a", 64) + "\n",
		"not a digest":  "convoy-observer@latest\nconvoy-api@sha256:" + strings.Repeat("b", 64) + "\n",
	} {
		f := filepath.Join(dir, "digests")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadDigests(f); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ReadDigests(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Errorf("missing file: %v, want a pointer to make images", err)
	}
}
