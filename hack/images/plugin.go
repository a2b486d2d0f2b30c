package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// PluginBinary is the name of convoyctl as a kubectl plugin: kubectl runs
// `kubectl convoy …` as kubectl-convoy found on $PATH.
const PluginBinary = "kubectl-convoy"

// PluginPlatforms are the platforms the plugin is archived for by default.
var PluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}

// KrewPlugin is a krew plugin manifest (apiVersion krew.googlecontainertools.github.com/
// v1alpha2, kind Plugin), the fields krew reads. (krew's own Go module pins client-go
// v11, which this module cannot import; the schema is small and stable.)
type KrewPlugin struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       KrewPluginSpec    `json:"spec"`
}

// KrewPluginSpec is the spec of a KrewPlugin.
type KrewPluginSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage,omitempty"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description,omitempty"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one archive of the plugin: the OS and architecture it runs on (labels
// os and arch), where to download it, its SHA-256 (hex) and the files krew installs.
type KrewPlatform struct {
	Selector *metav1.LabelSelector `json:"selector"`
	URI      string                `json:"uri"`
	SHA256   string                `json:"sha256"`
	Files    []KrewFile            `json:"files"`
	Bin      string                `json:"bin"`
}

// KrewFile copies From (a glob in the archive) to To (in the plugin's directory).
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// semverRE is the version krew accepts.
var semverRE = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// PluginOptions are the inputs of Plugin.
type PluginOptions struct {
	Dir    string // the repository
	Out    string // where the archives and convoy.yaml go
	Source Source
	// URL is where the archives are downloaded from: each archive's uri is URL/ARCHIVE.
	URL       string
	Platforms []string // OS/ARCH; empty: PluginPlatforms
}

// Plugin builds cmd/convoyctl as kubectl-convoy for each platform (static, -trimpath,
// the version of the images), archives each as OUT/kubectl-convoy_VERSION_OS_ARCH.tar.gz
// (the binary alone, every timestamp the commit's, so the same commit gives the same
// archives), and writes the krew manifest OUT/convoy.yaml that installs them. It returns
// the manifest's path.
func Plugin(o PluginOptions, log io.Writer) (string, error) {
	platforms := o.Platforms
	if len(platforms) == 0 {
		platforms = PluginPlatforms
	}
	if o.URL == "" {
		return "", fmt.Errorf("no URL to download the plugin's archives from")
	}
	// krew takes only a semantic version with a leading v (make release's VERSION).
	if !semverRE.MatchString(o.Source.Version) {
		return "", fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH[-PRERELEASE], as krew requires (--version)", o.Source.Version)
	}
	seen := map[string]bool{}
	for _, p := range platforms {
		if seen[strings.TrimSpace(p)] {
			return "", fmt.Errorf("platform %s given twice", p)
		}
		seen[strings.TrimSpace(p)] = true
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "convoy-plugin-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	m := KrewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   metav1.ObjectMeta{Name: "convoy"},
		Spec: KrewPluginSpec{
			Version:          o.Source.Version,
			Homepage:         o.Source.URL,
			ShortDescription: "Read the health convoy-observer records for Releases",
			Description: "kubectl convoy is convoyctl as a kubectl plugin: `kubectl convoy release status NAME` and\n" +
				"`release wait` read a Release's health through the kube-apiserver, and `health eval`, `lint`,\n" +
				"`test` and `coverage` check health rules offline or against a cluster, with kubectl's\n" +
				"connection flags (--kubeconfig, --context, -n, --as).\n",
		},
	}
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return "", fmt.Errorf("platform %q is not OS/ARCH", p)
		}
		bin := PluginBinary
		if goos == "windows" {
			bin += ".exe"
		}
		path := filepath.Join(tmp, goos+"_"+goarch, bin)
		fmt.Fprintf(log, "plugin: building %s for %s/%s\n", bin, goos, goarch)
		if _, err := run(o.Dir, []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch},
			"go", "build", "-trimpath", "-ldflags="+ldflags(o.Source), "-o", path, "./cmd/convoyctl"); err != nil {
			return "", err
		}
		archive, err := tarGz(path, bin, o.Source)
		if err != nil {
			return "", err
		}
		name := fmt.Sprintf("%s_%s_%s_%s.tar.gz", PluginBinary, o.Source.Version, goos, goarch)
		if err := os.WriteFile(filepath.Join(o.Out, name), archive, 0o644); err != nil {
			return "", err
		}
		sum := sha256.Sum256(archive)
		m.Spec.Platforms = append(m.Spec.Platforms, KrewPlatform{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
			URI:      strings.TrimSuffix(o.URL, "/") + "/" + name,
			SHA256:   hex.EncodeToString(sum[:]),
			Files:    []KrewFile{{From: bin, To: "."}},
			Bin:      bin,
		})
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		return "", err
	}
	manifest := filepath.Join(o.Out, "convoy.yaml")
	head := fmt.Sprintf("# convoy-observer %s: the krew plugin manifest of kubectl convoy\n#   kubectl krew install --manifest=convoy.yaml\n", o.Source.Version)
	return manifest, os.WriteFile(manifest, append([]byte(head), data...), 0o644)
}

// tarGz is a gzip-compressed tar archive of the one file path, named name, executable,
// with the source's time (and no name or time in the gzip header).
func tarGz(path, name string, src Source) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	if err := writeFile(tw, name, data, 0o755, src.Created); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
