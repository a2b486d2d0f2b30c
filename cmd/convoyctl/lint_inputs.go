package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/manifest"
)

// kustomizationFiles are the names kustomize looks for in a directory.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// manifestFiles returns path itself for a file; for a directory, its *.yaml, *.yml and
// *.json files (not recursive, sorted), or "" and true when it holds a kustomization.
func manifestFiles(path string) (files []string, kustomization bool, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, err
	}
	if !fi.IsDir() {
		return []string{path}, false, nil
	}
	for _, k := range kustomizationFiles {
		if _, err := os.Stat(filepath.Join(path, k)); err == nil {
			return nil, true, nil
		}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, false, err
	}
	for _, e := range entries {
		if ext := strings.ToLower(filepath.Ext(e.Name())); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, false, fmt.Errorf("%s holds no kustomization and no .yaml, .yml or .json file", path)
	}
	slices.Sort(files)
	return files, false, nil
}

// kustomizeBuild renders the kustomization in dir as `kubectl apply -k DIR` would.
func kustomizeBuild(dir string) ([]byte, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return out, nil
}

// readRuleSetArgs reads the rule sets of each argument of health lint: a file, a
// directory of files, or a directory with a kustomization (what kubectl apply -k
// installs). An argument without any rule set is an error: it would lint clean.
func readRuleSetArgs(paths []string) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet, error) {
	var global []extv1alpha1.GlobalHealthRuleSet
	var local []extv1alpha1.HealthRuleSet
	for _, path := range paths {
		before := len(global) + len(local)
		files, kustomization, err := manifestFiles(path)
		if err != nil {
			return nil, nil, fmt.Errorf("reading rules: %w", err)
		}
		if kustomization {
			data, err := kustomizeBuild(path)
			if err != nil {
				return nil, nil, fmt.Errorf("reading rules: %w", err)
			}
			g, l, err := manifest.DecodeRuleSets(bytes.NewReader(data))
			if err != nil {
				return nil, nil, fmt.Errorf("reading rules of kustomize build %s: %w", path, err)
			}
			global, local = append(global, g...), append(local, l...)
		}
		for _, f := range files {
			g, l, err := readRuleSets(f)
			if err != nil {
				return nil, nil, err
			}
			global, local = append(global, g...), append(local, l...)
		}
		if len(global)+len(local) == before {
			// A wrong or empty path would otherwise lint clean.
			return nil, nil, fmt.Errorf("reading rules: %s holds no GlobalHealthRuleSet or HealthRuleSet", path)
		}
	}
	return global, local, nil
}

// readCRDs reads the CustomResourceDefinitions of health lint --schema: files or
// directories of files (YAML or JSON, multi-document or List). Any other kind is an
// error naming the file, and so is a path without any CustomResourceDefinition, so a
// wrong path is not silently ignored.
func readCRDs(paths []string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	var out []apiextensionsv1.CustomResourceDefinition
	for _, path := range paths {
		before := len(out)
		files, kustomization, err := manifestFiles(path)
		if err != nil {
			return nil, fmt.Errorf("reading --schema: %w", err)
		}
		if kustomization {
			return nil, fmt.Errorf("reading --schema %s: a kustomization; name its CRD files", path)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("reading --schema: %w", err)
			}
			crds, err := manifest.DecodeCRDs(bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("reading --schema %s: %w", f, err)
			}
			out = append(out, crds...)
		}
		if len(out) == before {
			return nil, fmt.Errorf("reading --schema: %s holds no CustomResourceDefinition", path)
		}
	}
	return out, nil
}
