package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/library"
)

// libraryCopy is the kustomize root of the rule library; its rule set files are copies
// of health/library/*.yaml (kustomize loads nothing outside its root).
const libraryCopy = "rules/library"

// TestLibraryCopies checks that config/rules/library holds a byte-identical copy of every
// file of health/library and no other rule set file; -update-rules copies them.
func TestLibraryCopies(t *testing.T) {
	names := library.FileNames()
	for _, name := range names {
		src, err := library.Files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(libraryCopy, name)
		if *updateRules {
			if err := os.WriteFile(dst, src, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cp, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(src, cp) {
			t.Errorf("config/%s differs from health/library/%s (%v); the health/ file is the source: run\n"+
				"\tgo test ./config -run TestLibraryCopies -update-rules", dst, name, err)
		}
	}
	extra, err := filepath.Glob(filepath.Join(libraryCopy, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range extra {
		if base := filepath.Base(p); base != "kustomization.yaml" && !slices.Contains(names, base) {
			t.Errorf("config/%s has no source in health/library", p)
		}
	}
}

// TestLibrary renders config/rules/library like `kubectl apply -k config/rules/library`
// would: exactly the sets of health/library, cluster-scoped, with their labels and rules
// unchanged. config/default does not install them (opt-in).
func TestLibrary(t *testing.T) {
	objs := render(t, libraryCopy)
	sets, err := library.RuleSets()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(sets) {
		t.Errorf("config/%s renders %d objects, want the %d sets of health/library", libraryCopy, len(objs), len(sets))
	}
	for i := range sets {
		want := &sets[i]
		o := objs.get(t, "GlobalHealthRuleSet", "", want.Name)
		var got extv1alpha1.GlobalHealthRuleSet
		if err := yaml.UnmarshalStrict(o.yaml, &got); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		if got.Labels[library.LabelLibrary] != "true" || got.Labels[library.LabelSet] == "" {
			t.Errorf("%s: labels %v", o, got.Labels)
		}
		if !slices.EqualFunc(got.Spec.Rules, want.Spec.Rules, func(a, b extv1alpha1.RuleSpec) bool {
			return a.APIVersion == b.APIVersion && slices.Equal(a.Resources, b.Resources) &&
				a.RuleExpression == b.RuleExpression && a.MessageExpression == b.MessageExpression
		}) {
			t.Errorf("%s: rendered rules differ from health/library", o)
		}
	}
	for _, o := range render(t, "default").ofKind("GlobalHealthRuleSet") {
		if o.labels[library.LabelLibrary] != "" {
			t.Errorf("config/default installs the library set %s; the library is opt-in", o)
		}
	}
}
