package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// User is the UID and GID the images run as (the "nonroot" of distroless images).
const User = 65532

// BinDir is where the binary sits in the image.
const BinDir = "/usr/local/bin"

// Source is what the images are built from.
type Source struct {
	// Module is the main module path; URL the repository it names (https://MODULE).
	Module, URL string
	// Revision is the commit ("" outside a git checkout); Dirty is true when the work tree
	// has uncommitted changes (the images are then not reproducible from the commit).
	Revision string
	Dirty    bool
	// Version is the tag of the images and their org.opencontainers.image.version.
	Version string
	// Created is the commit time (or $SOURCE_DATE_EPOCH, or the Unix epoch): every
	// timestamp in the images.
	Created time.Time
}

// ReadSource reads the module, commit and commit time of the checkout at dir. version,
// when not empty, overrides `git describe --tags --always --dirty`.
func ReadSource(dir, version string) (Source, error) {
	s := Source{Version: version, Created: time.Unix(0, 0).UTC()}
	mod, err := run(dir, nil, "go", "list", "-m")
	if err != nil {
		return s, err
	}
	s.Module = mod
	s.URL = "https://" + mod
	if rev, err := run(dir, nil, "git", "rev-parse", "HEAD"); err == nil {
		s.Revision = rev
		st, err := run(dir, nil, "git", "status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return s, err
		}
		s.Dirty = st != ""
		ct, err := run(dir, nil, "git", "log", "-1", "--format=%ct")
		if err != nil {
			return s, err
		}
		sec, err := strconv.ParseInt(ct, 10, 64)
		if err != nil {
			return s, fmt.Errorf("commit time %q: %w", ct, err)
		}
		s.Created = time.Unix(sec, 0).UTC()
		if s.Version == "" {
			if s.Version, err = run(dir, nil, "git", "describe", "--tags", "--always", "--dirty"); err != nil {
				return s, err
			}
		}
	}
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		sec, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return s, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", e, err)
		}
		s.Created = time.Unix(sec, 0).UTC()
	}
	if s.Version == "" {
		s.Version = "dev"
	}
	return s, nil
}

// BuildOptions say what Build builds.
type BuildOptions struct {
	// Dir is the module root; Out the output directory (relative to the working directory).
	Dir, Out string
	Source   Source
	// Platforms are "linux/amd64"-style pairs, one manifest each.
	Platforms []string
	// Names are the images to build (default: images).
	Names []string
}

// Built is one image written by Build.
type Built struct {
	Name string
	// Layout is the OCI layout directory; Digest the index's digest.
	Layout    string
	Digest    v1.Hash
	Size      int64 // bytes of the compressed layers and the config, summed over platforms
	Platforms []string
	// Referrers are the SBOM and provenance of each platform image, in the layout's
	// index.json beside the index.
	Referrers []v1.Descriptor
}

// Build compiles and assembles the images (see the package comment), logging progress to
// log, and writes OUT/NAME (an OCI layout) and OUT/digests.
func Build(o BuildOptions, log io.Writer) ([]Built, error) {
	names := o.Names
	if len(names) == 0 {
		names = images
	}
	if o.Source.Dirty {
		fmt.Fprintln(log, "images: the work tree has uncommitted changes; these images are not reproducible from the commit")
	}
	tmp, err := os.MkdirTemp("", "convoy-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	base, err := baseLayer(o.Source.Created)
	if err != nil {
		return nil, err
	}
	modCache, err := run(o.Dir, nil, "go", "env", "GOMODCACHE")
	if err != nil {
		return nil, err
	}
	var built []Built
	var digests strings.Builder
	for _, name := range names {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		b := Built{Name: name, Layout: filepath.Join(o.Out, name)}
		var refs []v1.Image
		for _, p := range o.Platforms {
			goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
			if !ok || goos == "" || goarch == "" {
				return nil, fmt.Errorf("platform %q is not OS/ARCH", p)
			}
			bin := filepath.Join(tmp, goos+"_"+goarch, name)
			fmt.Fprintf(log, "images: building %s for %s/%s\n", name, goos, goarch)
			if _, err := run(o.Dir, []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch},
				"go", "build", "-trimpath", "-ldflags="+ldflags(o.Source), "-o", bin, "./cmd/"+name); err != nil {
				return nil, err
			}
			img, err := image(name, bin, goos, goarch, base, o.Source)
			if err != nil {
				return nil, fmt.Errorf("%s %s/%s: %w", name, goos, goarch, err)
			}
			if b.Size, err = addSize(b.Size, img); err != nil {
				return nil, err
			}
			att, err := attestations(name, bin, goos, goarch, img, o.Source, modCache)
			if err != nil {
				return nil, err
			}
			refs = append(refs, att...)
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: goos, Architecture: goarch},
			}})
			b.Platforms = append(b.Platforms, goos+"/"+goarch)
		}
		idx = mutate.Annotations(idx, annotations(name, o.Source)).(v1.ImageIndex)
		if err := os.RemoveAll(b.Layout); err != nil {
			return nil, err
		}
		// The layout's index.json names the image index (by digest, with its tag as
		// org.opencontainers.image.ref.name), as `crane push`, skopeo and oras expect.
		p, err := layout.Write(b.Layout, empty.Index)
		if err != nil {
			return nil, err
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.Source.Version})); err != nil {
			return nil, err
		}
		// The referrers (OCI 1.1: manifests with a subject) sit beside it, untagged.
		for _, r := range refs {
			if err := p.AppendImage(r); err != nil {
				return nil, err
			}
			d, err := partial.Descriptor(r)
			if err != nil {
				return nil, err
			}
			b.Referrers = append(b.Referrers, *d)
		}
		if b.Digest, err = idx.Digest(); err != nil {
			return nil, err
		}
		built = append(built, b)
		fmt.Fprintf(&digests, "%s@%s\n", name, b.Digest)
	}
	return built, os.WriteFile(filepath.Join(o.Out, "digests"), []byte(digests.String()), 0o644)
}

// ldflags strip the symbol tables and set the version the binaries print (package
// internal/version) to the image's: its version, commit and commit time.
func ldflags(src Source) string {
	const pkg = "github.com/kumodo/convoy-observer/internal/version."
	f := "-s -w -X " + pkg + "linkVersion=" + src.Version
	if src.Revision != "" {
		f += " -X " + pkg + "linkCommit=" + src.Revision + " -X " + pkg + "linkDate=" + src.Created.Format(time.RFC3339)
	}
	return f
}

// image is one platform's image of the binary bin on the base layer.
func image(name, bin, goos, goarch string, base v1.Layer, src Source) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr", "usr/local", "usr/local/bin"} {
		if err := tw.WriteHeader(dirHeader(d, 0o755, 0, src.Created)); err != nil {
			return nil, err
		}
	}
	if err := writeFile(tw, strings.TrimPrefix(BinDir, "/")+"/"+name, data, 0o755, src.Created); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	app, err := layer(buf.Bytes())
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: src.Created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "hack/images: passwd, group, nsswitch.conf, CA certificates", Comment: "base"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: created, CreatedBy: "hack/images: go build ./cmd/" + name}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = goos, goarch, created
	cf.Config.Entrypoint = []string{BinDir + "/" + name}
	cf.Config.Cmd = nil
	cf.Config.User = fmt.Sprintf("%d:%d", User, User)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=" + BinDir, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = annotations(name, src)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, annotations(name, src)).(v1.Image), nil
}

// annotations are the OCI annotations (and config labels) of an image.
func annotations(name string, src Source) map[string]string {
	a := map[string]string{
		"org.opencontainers.image.title":   name,
		"org.opencontainers.image.source":  src.URL,
		"org.opencontainers.image.url":     src.URL,
		"org.opencontainers.image.version": src.Version,
		"org.opencontainers.image.created": src.Created.Format(time.RFC3339),
	}
	if src.Revision != "" {
		a["org.opencontainers.image.revision"] = src.Revision
	}
	return a
}

// baseLayer is the layer of files every image has (see the package comment).
func baseLayer(mtime time.Time) (v1.Layer, error) {
	var certs bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			// A distrust-after date cannot be said in a PEM bundle: leave the root out, as
			// the system bundles do, rather than trust it without its limit.
			continue
		}
		if err := pem.Encode(&certs, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("no CA certificates in golang.org/x/crypto/x509roots/fallback/bundle")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []struct {
		path string
		mode int64
		uid  int
	}{{"etc", 0o755, 0}, {"etc/ssl", 0o755, 0}, {"etc/ssl/certs", 0o755, 0}, {"home", 0o755, 0}, {"home/nonroot", 0o700, User}, {"tmp", 0o1777, 0}} {
		if err := tw.WriteHeader(dirHeader(d.path, d.mode, d.uid, mtime)); err != nil {
			return nil, err
		}
	}
	files := []struct {
		path string
		data string
	}{
		{"etc/passwd", fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", User, User)},
		{"etc/group", fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", User)},
		{"etc/nsswitch.conf", "hosts: files dns\n"},
		{"etc/ssl/certs/ca-certificates.crt", certs.String()},
	}
	for _, f := range files {
		if err := writeFile(tw, f.path, []byte(f.data), 0o644, mtime); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return layer(buf.Bytes())
}

func dirHeader(path string, mode int64, uid int, mtime time.Time) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime, Format: tar.FormatPAX}
}

func writeFile(tw *tar.Writer, path string, data []byte, mode int64, mtime time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// layer is a gzip-compressed OCI layer of the tar archive data (compression is
// deterministic: same archive, same digest).
func layer(data []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func addSize(total int64, img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	total += m.Config.Size
	for _, l := range m.Layers {
		total += l.Size
	}
	return total, nil
}

// run runs a command in dir with env added to the environment and returns its trimmed
// stdout; its stderr goes into the error.
func run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}
