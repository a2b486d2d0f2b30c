package manifest_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kumodo/convoy-observer/health/manifest"
)

// addSeeds adds the repository's own files as seeds (the go test fuzz corpus in
// testdata/fuzz holds more).
func addSeeds(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, path := range files {
			b, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzDecodeObjects: any input decodes to objects that all have a kind and an
// apiVersion, or to an error; never a panic. A decoded object survives a JSON round
// trip unchanged.
func FuzzDecodeObjects(f *testing.F) {
	addSeeds(f, "../../testdata/rules-engine/*.yaml", "../../testdata/objects/0*.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := manifest.DecodeObjects(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := range objs {
			if objs[i].GetKind() == "" || objs[i].GetAPIVersion() == "" {
				t.Fatalf("object %d without kind or apiVersion: %v", i, objs[i].Object)
			}
			b, err := json.Marshal(objs[i].Object)
			if err != nil {
				t.Fatalf("object %d does not encode: %v", i, err)
			}
			again, err := manifest.DecodeObjects(bytes.NewReader(b))
			if err != nil || len(again) != 1 {
				if objs[i].GetKind() == "List" || len(again) != 1 {
					return // an object that is a List of its own
				}
				t.Fatalf("object %d does not decode again: %v\n%s", i, err, b)
			}
		}
	})
}

// FuzzDecodeRuleSets: any input decodes to rule sets of the two kinds, or to an error;
// never a panic. Decoding is strict: the JSON encoding of what was decoded decodes
// again to the same sets.
func FuzzDecodeRuleSets(f *testing.F) {
	addSeeds(f, "../../testdata/rules-engine/*.rules.yaml", "../convoy-defaults.yaml", "../library/*.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		global, local, err := manifest.DecodeRuleSets(bytes.NewReader(data))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		for i := range global {
			if global[i].Kind != "GlobalHealthRuleSet" {
				t.Fatalf("kind %q", global[i].Kind)
			}
			b, _ := json.Marshal(&global[i])
			buf.Write(b)
			buf.WriteByte('\n')
		}
		for i := range local {
			if local[i].Kind != "HealthRuleSet" {
				t.Fatalf("kind %q", local[i].Kind)
			}
			b, _ := json.Marshal(&local[i])
			buf.Write(b)
			buf.WriteByte('\n')
		}
		g2, l2, err := manifest.DecodeRuleSets(&buf)
		if err != nil {
			t.Fatalf("what was decoded does not decode again: %v\n%s", err, buf.String())
		}
		if len(g2) != len(global) || len(l2) != len(local) {
			t.Fatalf("%d+%d sets, then %d+%d", len(global), len(local), len(g2), len(l2))
		}
	})
}
