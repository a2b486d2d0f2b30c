// Command gen writes the generated files of the Helm chart charts/convoy-observer (its
// templates, crds/ and values.yaml) from the kustomize bases: `make chart`, run from the
// repository's root. Chart.yaml is not generated.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kumodo/convoy-observer/hack/chart"
)

func main() {
	if err := write("."); err != nil {
		fmt.Fprintf(os.Stderr, "chart: %v\n", err)
		os.Exit(1)
	}
}

func write(root string) error {
	files, err := chart.Generate(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, chart.Dir)
	// Generated directories are replaced whole, so that an object removed from the
	// kustomize bases leaves the chart too.
	for _, d := range []string{"templates", "crds"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return err
		}
	}
	for path, data := range files {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s: %d files\n", dir, len(files))
	return nil
}
