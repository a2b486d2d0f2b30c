// Package manifesttest reads the YAML fixtures of tests with package manifest: each
// function opens the file, decodes it, and fails the test when it cannot, naming the file.
package manifesttest

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/manifest"
)

// RuleSets returns the GlobalHealthRuleSets and HealthRuleSets of the file path, decoded
// by manifest.DecodeRuleSets.
func RuleSets(tb testing.TB, path string) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	global, local, err := manifest.DecodeRuleSets(f)
	if err != nil {
		tb.Fatalf("decoding %s: %v", path, err)
	}
	return global, local
}

// CRDs returns the CustomResourceDefinitions of the files paths, in order, decoded by
// manifest.DecodeCRDs.
func CRDs(tb testing.TB, paths ...string) []apiextensionsv1.CustomResourceDefinition {
	tb.Helper()
	var out []apiextensionsv1.CustomResourceDefinition
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		crds, err := manifest.DecodeCRDs(f)
		f.Close()
		if err != nil {
			tb.Fatalf("decoding %s: %v", path, err)
		}
		out = append(out, crds...)
	}
	return out
}

// Objects returns the objects of the file path, decoded by manifest.DecodeObjects (as
// live objects arrive: integers are int64).
func Objects(tb testing.TB, path string) []unstructured.Unstructured {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	objs, err := manifest.DecodeObjects(f)
	if err != nil {
		tb.Fatalf("decoding %s: %v", path, err)
	}
	return objs
}

// Object returns the one object of the file path, as Objects decodes it; a file with
// none or more than one fails the test.
func Object(tb testing.TB, path string) *unstructured.Unstructured {
	tb.Helper()
	objs := Objects(tb, path)
	if len(objs) != 1 {
		tb.Fatalf("%s: want one object, got %d", path, len(objs))
	}
	return &objs[0]
}

// DecodableObjects returns the content of every object of the *.yaml files in dirs,
// directory by directory, skipping the files that do not decode (fixtures that strict
// decoding rejects on purpose): a corpus for tests that run over many objects.
func DecodableObjects(tb testing.TB, dirs ...string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			tb.Fatal(err)
		}
		for _, path := range files {
			f, err := os.Open(path)
			if err != nil {
				tb.Fatal(err)
			}
			objs, err := manifest.DecodeObjects(f)
			f.Close()
			if err != nil {
				continue
			}
			for i := range objs {
				out = append(out, objs[i].Object)
			}
		}
	}
	return out
}
