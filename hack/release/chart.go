package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"

	"github.com/kumodo/convoy-observer/hack/chart"
)

// PackageChart packages the Helm chart of the repository at root into out, as `helm
// package` does, with version and appVersion set to the release's (without the leading
// v for the chart's SemVer version) and the images of values.yaml pinned to
// registry/NAME@DIGEST; it returns the archive's path (out/convoy-observer-VERSION.tgz).
func PackageChart(root, registry, version string, digests map[string]string, out string) (string, error) {
	ch, err := loader.Load(filepath.Join(root, chart.Dir))
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = strings.TrimPrefix(version, "v")
	ch.Metadata.AppVersion = version
	pinned := 0
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		// values.yaml keeps its comments: the two image lines are replaced in its text,
		// then parsed again.
		for key, image := range map[string]string{"observer": "convoy-observer", "api": "convoy-api"} {
			old := fmt.Appendf(nil, "  image: %q\n", image+":latest")
			if bytes.Count(f.Data, old) != 1 {
				return "", fmt.Errorf("%s: no single line %q (the %s image)", chart.Dir+"/values.yaml", strings.TrimSpace(string(old)), key)
			}
			f.Data = bytes.Replace(f.Data, old, fmt.Appendf(nil, "  image: %q\n", registry+"/"+image+"@"+digests[image]), 1)
			pinned++
		}
		if err := yaml.Unmarshal(f.Data, &ch.Values); err != nil {
			return "", err
		}
	}
	if pinned != 2 {
		return "", fmt.Errorf("%s has no values.yaml", chart.Dir)
	}
	return chartutil.Save(ch, out)
}
