// Command crdschemas trims CustomResourceDefinitions to what health lint needs, for the
// fixtures in health/lint/testdata/crds: it keeps every field that shapes the schema and
// drops the prose (description) and the validation rules (x-kubernetes-validations),
// which are most of a CRD's size and never change a type.
//
//	go run ./hack/crdschemas -o health/lint/testdata/crds upstream/*.yaml
//	go run ./hack/crdschemas -o health/lint/testdata/crds -versions v1beta2 old/kustomizations.yaml
//
// Each input file holds one or more CRDs (YAML); each CRD is written to
// OUT/<spec.group>_<spec.names.plural>.yaml, or, with -versions (a comma-separated
// list), with only those versions to OUT/<spec.group>_<spec.names.plural>.<versions>.yaml:
// a version that the current CRD no longer serves, from an older release, next to the
// current one. Other documents are an error.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

func main() {
	out := flag.String("o", ".", "output directory")
	versions := flag.String("versions", "", "keep only these versions (comma-separated), written under a name that lists them")
	flag.Parse()
	for _, path := range flag.Args() {
		if err := trimFile(path, *out, *versions); err != nil {
			fmt.Fprintf(os.Stderr, "crdschemas: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

// trimFile writes the trimmed CRDs of path to dir, with only the versions listed in
// keep when it is not empty.
func trimFile(path, dir, keep string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if doc == nil {
			continue
		}
		if doc["kind"] != "CustomResourceDefinition" {
			return fmt.Errorf("a %v, not a CustomResourceDefinition", doc["kind"])
		}
		spec, _ := doc["spec"].(map[string]any)
		names, _ := spec["names"].(map[string]any)
		group, plural := spec["group"], names["plural"]
		if group == nil || plural == nil {
			return fmt.Errorf("a CustomResourceDefinition without spec.group or spec.names.plural")
		}
		delete(doc, "status")
		if md, ok := doc["metadata"].(map[string]any); ok {
			doc["metadata"] = map[string]any{"name": md["name"]}
		}
		trim(spec)
		base := fmt.Sprintf("%s_%s", group, plural)
		if keep != "" {
			var kept []any
			all, _ := spec["versions"].([]any)
			for _, v := range all {
				if m, ok := v.(map[string]any); ok && slices.Contains(strings.Split(keep, ","), fmt.Sprint(m["name"])) {
					m["storage"] = false // the current CRD's storage version stays the one
					kept = append(kept, m)
				}
			}
			if len(kept) != len(strings.Split(keep, ",")) {
				return fmt.Errorf("%s has not every version of %s", base, keep)
			}
			spec["versions"] = kept
			base += "." + strings.ReplaceAll(keep, ",", "-")
		}
		b, err := sigsyaml.Marshal(doc)
		if err != nil {
			return err
		}
		name := filepath.Join(dir, base+".yaml")
		if err := os.WriteFile(name, b, 0o644); err != nil {
			return err
		}
	}
}

// trim removes description and x-kubernetes-validations everywhere below v.
func trim(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if k == "description" || k == "x-kubernetes-validations" {
				if _, isString := c.(string); isString || k == "x-kubernetes-validations" {
					delete(t, k)
					continue
				}
			}
			trim(c)
		}
	case []any:
		for _, c := range t {
			trim(c)
		}
	}
}
