package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestPlugin builds the plugin's archive for this machine (twice), and checks
// the krew manifest as krew does before installing: its name and semantic version, one
// platform per archive with os and arch labels, each uri under the URL, each sha256 the
// archive's, and the bin inside the archive; this machine's binary runs as kubectl
// convoy. Built twice, the archives are the same bytes.
func TestPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds convoyctl")
	}
	src, err := ReadSource("../..", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	here := runtime.GOOS + "/" + runtime.GOARCH
	opts := PluginOptions{Dir: "../..", Source: src, URL: "https://downloads.example.com/convoy/v1.2.3/", Platforms: []string{here}}
	var sums [2]map[string]string
	for i := range sums {
		opts.Out = t.TempDir()
		manifest, err := Plugin(opts, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = checkManifest(t, manifest, opts)
	}
	for uri, sum := range sums[0] {
		if sums[1][uri] != sum {
			t.Errorf("%s: built twice from the same tree, sha256 %s and %s", uri, sum, sums[1][uri])
		}
	}
	// A version krew would refuse, and a platform twice, are refused before building.
	bad := opts
	bad.Source.Version = "c158526"
	if _, err := Plugin(bad, io.Discard); err == nil || !strings.Contains(err.Error(), "krew") {
		t.Errorf("version c158526: %v, want a refusal naming krew", err)
	}
	bad = opts
	bad.Platforms = []string{here, here}
	if _, err := Plugin(bad, io.Discard); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a platform twice: %v, want a refusal", err)
	}
	// The binary of this machine's archive answers as the plugin.
	bin := filepath.Join(t.TempDir(), PluginBinary)
	if err := extract(filepath.Join(opts.Out, PluginBinary+"_v1.2.3_"+strings.ReplaceAll(here, "/", "_")+".tar.gz"), PluginBinary, bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kubectl convoy v1.2.3 ") {
		t.Errorf("%s --version: %v, printed %q; want \"kubectl convoy v1.2.3 …\"", bin, err, out)
	}
}

// checkManifest checks the manifest (see TestPlugin) and returns uri → sha256.
func checkManifest(t *testing.T, path string, o PluginOptions) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m KrewPlugin
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "convoy" {
		t.Errorf("manifest is %s %s %q, want a krew Plugin named convoy", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(m.Spec.Version) || m.Spec.ShortDescription == "" || m.Spec.Homepage == "" {
		t.Errorf("spec: version %q (want vMAJOR.MINOR.PATCH), shortDescription %q, homepage %q", m.Spec.Version, m.Spec.ShortDescription, m.Spec.Homepage)
	}
	if len(m.Spec.Platforms) != len(o.Platforms) {
		t.Fatalf("%d platforms, want %d", len(m.Spec.Platforms), len(o.Platforms))
	}
	sums := map[string]string{}
	for i, p := range m.Spec.Platforms {
		goos, goarch, _ := strings.Cut(o.Platforms[i], "/")
		if p.Selector == nil || p.Selector.MatchLabels["os"] != goos || p.Selector.MatchLabels["arch"] != goarch {
			t.Errorf("platform %d: selector %v, want os=%s arch=%s", i, p.Selector, goos, goarch)
		}
		name := strings.TrimPrefix(p.URI, "https://downloads.example.com/convoy/v1.2.3/")
		if name == p.URI || strings.Contains(name, "/") {
			t.Errorf("platform %d: uri %q is not under the URL", i, p.URI)
			continue
		}
		archive, err := os.ReadFile(filepath.Join(o.Out, name))
		if err != nil {
			t.Errorf("platform %d: %v", i, err)
			continue
		}
		sum := sha256.Sum256(archive)
		if p.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("platform %d: sha256 %s, the archive's is %x", i, p.SHA256, sum)
		}
		sums[p.URI] = p.SHA256
		wantBin := PluginBinary
		if goos == "windows" {
			wantBin += ".exe"
		}
		if p.Bin != wantBin || len(p.Files) != 1 || p.Files[0].From != wantBin {
			t.Errorf("platform %d: bin %q, files %v; want %s", i, p.Bin, p.Files, wantBin)
		}
		if err := extract(filepath.Join(o.Out, name), p.Bin, filepath.Join(t.TempDir(), "bin")); err != nil {
			t.Errorf("platform %d: %v", i, err)
		}
	}
	return sums
}

// extract writes the file name of the tar.gz archive to dst (executable).
func extract(archive, name, dst string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return err // io.EOF: not found
		}
		if h.Name == name {
			if h.Mode&0o111 == 0 {
				return os.ErrPermission
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o755)
		}
	}
}
