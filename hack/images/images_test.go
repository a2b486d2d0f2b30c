package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImages builds both images for this machine's platform twice, into two directories,
// and inspects what a container runtime would run: the same digests both times, the OCI
// annotations, the entrypoint, user 65532, exactly the files of the package comment (no
// shell, no other program), and the binary taken from its layer runs --version and --help.
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	src, err := ReadSource("../..", "")
	if err != nil {
		t.Fatal(err)
	}
	opts := BuildOptions{Dir: "../..", Source: src, Platforms: []string{runtime.GOOS + "/" + runtime.GOARCH}}
	var runs [2][]Built
	for i := range runs {
		opts.Out = t.TempDir()
		if runs[i], err = Build(opts, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range runs[0] {
		if again := runs[1][i]; again.Digest != b.Digest {
			t.Errorf("%s: built twice from the same tree, digests %s and %s", b.Name, b.Digest, again.Digest)
		}
		t.Run(b.Name, func(t *testing.T) { inspect(t, b, src) })
	}
	digests, err := os.ReadFile(filepath.Join(filepath.Dir(runs[1][0].Layout), "digests"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range runs[1] {
		if !strings.Contains(string(digests), b.Name+"@"+b.Digest.String()+"\n") {
			t.Errorf("digests file %q lacks %s@%s", digests, b.Name, b.Digest)
		}
	}
}

func inspect(t *testing.T, b Built, src Source) {
	p, err := layout.FromPath(b.Layout)
	if err != nil {
		t.Fatal(err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Manifests) != 1 || rm.Manifests[0].Digest != b.Digest {
		t.Fatalf("layout index.json lists %v, want the one index %s", rm.Manifests, b.Digest)
	}
	idx, err := root.ImageIndex(b.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/kumodo/convoy-observer",
		"org.opencontainers.image.revision": src.Revision,
		"org.opencontainers.image.title":    b.Name,
	} {
		if got := im.Annotations[k]; got != want || want == "" {
			t.Errorf("index annotation %s = %q, want %q", k, got, want)
		}
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("index manifests %+v, want one for %s", im.Manifests, runtime.GOARCH)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	bin := BinDir + "/" + b.Name
	if !slices.Equal(cf.Config.Entrypoint, []string{bin}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [%s] and none", cf.Config.Entrypoint, cf.Config.Cmd, bin)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if cf.Config.Labels["org.opencontainers.image.revision"] != src.Revision {
		t.Errorf("label revision %q, want %q", cf.Config.Labels["org.opencontainers.image.revision"], src.Revision)
	}
	files := readFiles(t, img)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"etc/group", "etc/nsswitch.conf", "etc/passwd", "etc/ssl/certs/ca-certificates.crt", strings.TrimPrefix(bin, "/")}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("regular files %q, want exactly %q (no shell, nothing else)", names, want)
	}
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd %q has no nonroot user 65532", files["etc/passwd"].data)
	}
	if n := bytes.Count(files["etc/ssl/certs/ca-certificates.crt"].data, []byte("BEGIN CERTIFICATE")); n < 50 {
		t.Errorf("ca-certificates.crt holds %d certificates, want the Mozilla roots (over 100)", n)
	}
	if f := files[strings.TrimPrefix(bin, "/")]; f.mode&0o111 == 0 {
		t.Errorf("%s mode %o is not executable", bin, f.mode)
	}
	exe := filepath.Join(t.TempDir(), b.Name)
	if err := os.WriteFile(exe, files[strings.TrimPrefix(bin, "/")].data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), b.Name+" ") || !strings.Contains(string(out), "commit "+src.Revision) {
		t.Errorf("%s --version: %v, %q; want %q with commit %s", b.Name, err, out, b.Name+" VERSION (…)", src.Revision)
	}
	out, err = exec.Command(exe, "--help").CombinedOutput()
	var ee *exec.ExitError
	if (err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 0)) || !strings.Contains(string(out), "-kubeconfig") {
		t.Errorf("%s --help: %v, %q; want the flags, exit 0", b.Name, err, out)
	}
}

type file struct {
	mode int64
	data []byte
}

// readFiles returns the regular files of img's layers (later layers win).
func readFiles(t *testing.T, img v1.Image) map[string]file {
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]file{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch h.Typeflag {
			case tar.TypeDir:
			case tar.TypeReg:
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				files[h.Name] = file{mode: h.Mode, data: data}
			default:
				t.Errorf("layer entry %s of type %q: only files and directories are expected", h.Name, h.Typeflag)
			}
		}
		rc.Close()
	}
	return files
}
