package chart

import (
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/yaml"
)

// Render renders the chart at dir as `helm template --namespace namespace --include-crds`
// does, with values over values.yaml, and returns its objects: the CRDs first, then the
// templates' in the order of their file names.
func Render(dir string, values map[string]any, namespace string) ([]map[string]any, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	vals, err := util.ToRenderValues(ch, values, common.ReleaseOptions{Name: "convoy-observer", Namespace: namespace, IsInstall: true}, nil)
	if err != nil {
		return nil, err
	}
	rendered, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	var docs []string
	for _, crd := range ch.CRDObjects() {
		docs = append(docs, string(crd.File.Data))
	}
	names := make([]string, 0, len(rendered))
	for n := range rendered {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if strings.HasSuffix(n, ".yaml") {
			docs = append(docs, rendered[n])
		}
	}
	var out []map[string]any
	for _, d := range docs {
		for _, part := range strings.Split(d, "\n---") {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(part), &o); err != nil {
				return nil, fmt.Errorf("%w in:\n%s", err, part)
			}
			if len(o) > 0 {
				out = append(out, o)
			}
		}
	}
	return out, nil
}
