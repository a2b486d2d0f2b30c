package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"errors"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	spdxjson "github.com/spdx/tools-golang/json"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestImages builds both images for this machine's platform and one other (linux/amd64
// and linux/arm64, as make images does) twice, into two directories, and inspects what a
// container runtime would run: the same digests both times, the OCI annotations, one
// manifest per platform, the entrypoint, user 65532, exactly the files of the package
// comment (no shell, no other program), and the binary taken from its layer runs --version
// and --help; and each platform image's two referrers: an SPDX SBOM that names every module
// `go version -m` lists, and a SLSA provenance statement of that image from this commit.
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	src, err := ReadSource("../..", "")
	if err != nil {
		t.Fatal(err)
	}
	other := "linux/arm64"
	if runtime.GOOS+"/"+runtime.GOARCH == other {
		other = "linux/amd64"
	}
	opts := BuildOptions{Dir: "../..", Source: src, Platforms: []string{runtime.GOOS + "/" + runtime.GOARCH, other}}
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

	// make images-push: the tagged index and every referrer, which the registry's
	// referrers API then lists by subject.
	reg := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	var pushed bytes.Buffer
	if err := Push(filepath.Dir(runs[0][0].Layout), host+"/convoy", src.Version, &pushed); err != nil {
		t.Fatal(err)
	}
	for _, b := range runs[0] {
		if !strings.Contains(pushed.String(), host+"/convoy/"+b.Name+"@"+b.Digest.String()+"\n") {
			t.Errorf("push printed %q, want %s@%s", pushed.String(), b.Name, b.Digest)
		}
		tag, err := name.NewTag(host + "/convoy/" + b.Name + ":" + src.Version)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(tag)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range im.Manifests {
			d, err := name.NewDigest(host + "/convoy/" + b.Name + "@" + m.Digest.String())
			if err != nil {
				t.Fatal(err)
			}
			refs, err := remote.Referrers(d)
			if err != nil {
				t.Fatal(err)
			}
			rm, err := refs.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, r := range rm.Manifests {
				types = append(types, r.ArtifactType)
			}
			slices.Sort(types)
			if want := []string{SBOMType, ProvenanceType}; !slices.Equal(types, want) {
				t.Errorf("%s %v: the registry lists referrers %q, want %q", b.Name, m.Platform, types, want)
			}
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
	// The index, then the referrers: two per platform image.
	if len(rm.Manifests) != 1+2*len(b.Platforms) || rm.Manifests[0].Digest != b.Digest {
		t.Fatalf("layout index.json lists %v, want the index %s and %d referrers", rm.Manifests, b.Digest, 2*len(b.Platforms))
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
	if len(im.Manifests) != len(b.Platforms) {
		t.Fatalf("index manifests %+v, want one for each of %s", im.Manifests, b.Platforms)
	}
	for i, m := range im.Manifests {
		if m.Platform == nil || m.Platform.OS+"/"+m.Platform.Architecture != b.Platforms[i] {
			t.Errorf("index manifest %d is for %v, want %s", i, m.Platform, b.Platforms[i])
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(b.Platforms[i], func(t *testing.T) {
			checkReferrers(t, root, rm.Manifests[1:], m.Digest, readFiles(t, img)[strings.TrimPrefix(BinDir+"/"+b.Name, "/")].data, b.Name, src)
		})
	}
	img, err := idx.Image(im.Manifests[0].Digest) // this machine's
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

// checkReferrers checks the SBOM and the provenance whose subject is the image subject,
// of the binary bin: the SBOM names every module of `go version -m`, at its version; the
// provenance is a valid in-toto statement of SLSA provenance v1 about the image, built
// from src.Revision.
func checkReferrers(t *testing.T, root v1.ImageIndex, all []v1.Descriptor, subject v1.Hash, bin []byte, name string, src Source) {
	found := map[string][]byte{}
	for _, d := range all {
		img, err := root.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := img.RawManifest()
		if err != nil {
			t.Fatal(err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject == nil || m.Subject.Digest != subject {
			continue
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 || string(m.Config.MediaType) != m.ArtifactType || m.Config.Size != 2 {
			t.Fatalf("referrer %s: %d layers (%v), config %s of %d bytes; want one layer and the config {} of the artifact type %s",
				d.Digest, len(layers), err, m.Config.MediaType, m.Config.Size, m.ArtifactType)
		}
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := found[m.ArtifactType]; dup {
			t.Errorf("two referrers of type %s", m.ArtifactType)
		}
		found[m.ArtifactType] = content
	}
	if len(found) != 2 || found[SBOMType] == nil || found[ProvenanceType] == nil {
		t.Fatalf("referrers of %s: types %v, want %s and %s", subject, slices.Collect(maps.Keys(found)), SBOMType, ProvenanceType)
	}

	// Every module `go version -m` prints (its dep and => lines), in the SBOM at its version.
	exe := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "version", "-m", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := spdxjson.Read(bytes.NewReader(found[SBOMType]))
	if err != nil {
		t.Fatalf("SBOM is not SPDX JSON: %v", err)
	}
	inSBOM := map[string]bool{}
	for _, p := range doc.Packages {
		inSBOM[p.PackageName+"@"+p.PackageVersion] = true
	}
	// Lines "dep PATH VERSION [SUM]", each maybe followed by "=> PATH VERSION [SUM]",
	// the replacement that was built.
	var built []string
	for _, line := range strings.Split(string(out), "\n") {
		switch f := strings.Fields(line); {
		case len(f) >= 3 && f[0] == "dep":
			built = append(built, f[1]+"@"+f[2])
		case len(f) >= 3 && f[0] == "=>" && len(built) > 0:
			built[len(built)-1] = f[1] + "@" + f[2]
		}
	}
	for _, m := range built {
		if !inSBOM[m] {
			t.Errorf("module %s of go version -m is not in the SBOM", m)
		}
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	if len(built) < 20 || len(built) != len(bi.Deps) {
		t.Errorf("go version -m listed %d modules, the build info %d: parsed wrong", len(built), len(bi.Deps))
	}
	if !inSBOM[bi.Main.Path+"@"+doc.Packages[0].PackageVersion] || doc.Packages[0].PackageName != bi.Main.Path {
		t.Errorf("SBOM's first package %s %s, want the main module %s", doc.Packages[0].PackageName, doc.Packages[0].PackageVersion, bi.Main.Path)
	}
	licensed := 0
	for _, p := range doc.Packages {
		if p.PackageLicenseDeclared != "NOASSERTION" {
			licensed++
		}
	}
	if licensed < len(doc.Packages)/2 {
		t.Errorf("%d of %d packages have a licence: the module cache was not read", licensed, len(doc.Packages))
	}

	var st intoto.Statement
	if err := protojson.Unmarshal(found[ProvenanceType], &st); err != nil {
		t.Fatalf("provenance is not an in-toto statement: %v", err)
	}
	if err := st.Validate(); err != nil || st.GetPredicateType() != ProvenancePredicate {
		t.Errorf("provenance: %v, predicate type %q, want a valid %s", err, st.GetPredicateType(), ProvenancePredicate)
	}
	if got := st.GetSubject()[0].GetDigest()[subject.Algorithm]; got != subject.Hex {
		t.Errorf("provenance subject %s:%s, want the image %s", subject.Algorithm, got, subject)
	}
	var prov slsa.Provenance
	data, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(data, &prov); err != nil {
		t.Fatal(err)
	}
	if err := prov.Validate(); err != nil {
		t.Errorf("provenance predicate: %v", err)
	}
	if got := prov.GetBuildDefinition().GetResolvedDependencies()[0].GetDigest()["gitCommit"]; got != src.Revision {
		t.Errorf("provenance source commit %q, want %q", got, src.Revision)
	}
}
