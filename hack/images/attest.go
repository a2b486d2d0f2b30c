package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/licensecheck"
	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
	"golang.org/x/mod/module"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The artifact types of the referrers attached to every platform image.
const (
	// SBOMType is an SPDX 2.3 JSON document of the binary's modules.
	SBOMType = "application/spdx+json"
	// ProvenanceType is an in-toto Statement with a SLSA provenance v1 predicate.
	ProvenanceType = "application/vnd.in-toto+json"
	// ProvenancePredicate is the predicateType of the provenance statement.
	ProvenancePredicate = "https://slsa.dev/provenance/v1"
)

// emptyConfig is the content of an artifact manifest's config (the OCI empty JSON).
var emptyConfig = []byte("{}")

// attestations returns the SBOM and the provenance of the platform image img, whose
// binary is bin (built by Build with ldflags(src) for goos/goarch), each an OCI artifact
// manifest whose subject is img: what `oras discover` or a registry's referrers API lists.
// modCache is the module cache, where each module's licence is read (a module not there,
// or whose licence text is not recognised, has NOASSERTION).
func attestations(name, bin, goos, goarch string, img v1.Image, src Source, modCache string) ([]v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: reading its build information: %w", bin, err)
	}
	subject, err := partial.Descriptor(img)
	if err != nil {
		return nil, err
	}
	binSum := sha256.Sum256(data)
	sbom, err := sbomOf(name, goos, goarch, bi, hex.EncodeToString(binSum[:]), src, modCache)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: SBOM: %w", name, goos, goarch, err)
	}
	prov, err := provenanceOf(name, goos, goarch, bi, subject.Digest, hex.EncodeToString(binSum[:]), src)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: provenance: %w", name, goos, goarch, err)
	}
	var out []v1.Image
	for _, a := range []struct {
		artifactType, title string
		content             []byte
	}{{SBOMType, name + ".spdx.json", sbom}, {ProvenanceType, name + ".provenance.json", prov}} {
		r, err := referrer(a.artifactType, a.title, a.content, *subject, src.Created)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// sbomOf is the SPDX document of the binary: the main module (the described package),
// the Go standard library and every dependency module, each with its version, package
// URL and licence, the main module DEPENDS_ON each.
func sbomOf(name, goos, goarch string, bi *buildinfo.BuildInfo, binSum string, src Source, modCache string) ([]byte, error) {
	mainVersion := bi.Main.Version
	if mainVersion == "" || mainVersion == "(devel)" {
		mainVersion = src.Version
	}
	mainPkg := &spdx.Package{
		PackageName:             bi.Main.Path,
		PackageSPDXIdentifier:   "Package-main",
		PackageVersion:          mainVersion,
		PackageDownloadLocation: downloadLocation(src),
		PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: binSum}},
		PackageLicenseConcluded: "NOASSERTION",
		PackageLicenseDeclared:  "NOASSERTION",
		PackageCopyrightText:    "NOASSERTION",
		PrimaryPackagePurpose:   "APPLICATION",
		PackageExternalReferences: []*spdx.PackageExternalReference{
			purlRef(bi.Main.Path, mainVersion),
		},
		PackageComment: fmt.Sprintf("the binary /usr/local/bin/%s for %s/%s; checksum is the binary's", name, goos, goarch),
	}
	pkgs := []*spdx.Package{mainPkg, {
		PackageName:               "stdlib",
		PackageSPDXIdentifier:     "Package-stdlib",
		PackageVersion:            bi.GoVersion,
		PackageDownloadLocation:   "NOASSERTION",
		PackageLicenseConcluded:   "BSD-3-Clause",
		PackageLicenseDeclared:    "BSD-3-Clause",
		PackageCopyrightText:      "NOASSERTION",
		PackageExternalReferences: []*spdx.PackageExternalReference{purlRef("stdlib", bi.GoVersion)},
	}}
	for i, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		lic := licenceOf(modCache, m.Path, m.Version)
		p := &spdx.Package{
			PackageName:               m.Path,
			PackageSPDXIdentifier:     common.ElementID(fmt.Sprintf("Package-module-%d", i)),
			PackageVersion:            m.Version,
			PackageDownloadLocation:   "NOASSERTION",
			PackageLicenseConcluded:   lic,
			PackageLicenseDeclared:    lic,
			PackageCopyrightText:      "NOASSERTION",
			PackageExternalReferences: []*spdx.PackageExternalReference{purlRef(m.Path, m.Version)},
		}
		if m.Sum != "" {
			p.PackageComment = "go.sum " + m.Sum
		}
		if d.Replace != nil {
			p.PackageComment = strings.TrimSpace(fmt.Sprintf("replaces %s %s; %s", d.Path, d.Version, p.PackageComment))
		}
		pkgs = append(pkgs, p)
	}
	rels := []*spdx.Relationship{{
		RefA: common.MakeDocElementID("", "DOCUMENT"), RefB: common.MakeDocElementID("", string(mainPkg.PackageSPDXIdentifier)), Relationship: common.TypeRelationshipDescribe,
	}}
	for _, p := range pkgs[1:] {
		rels = append(rels, &spdx.Relationship{
			RefA: common.MakeDocElementID("", string(mainPkg.PackageSPDXIdentifier)), RefB: common.MakeDocElementID("", string(p.PackageSPDXIdentifier)), Relationship: common.TypeRelationshipDependsOn,
		})
	}
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      fmt.Sprintf("%s-%s-%s-%s", name, src.Version, goos, goarch),
		DocumentNamespace: fmt.Sprintf("%s/sbom/%s/%s/%s-%s/%s", src.URL, name, src.Version, goos, goarch, binSum),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "convoy-observer-hack-images"}},
			Created:  src.Created.UTC().Format(time.RFC3339),
		},
		Packages:      pkgs,
		Relationships: rels,
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// downloadLocation is the SPDX download location of the source: git+URL@COMMIT, or
// NOASSERTION outside a git checkout.
func downloadLocation(src Source) string {
	if src.Revision == "" {
		return "NOASSERTION"
	}
	return "git+" + src.URL + "@" + src.Revision
}

// purlRef is the package URL of the Go module path at version.
func purlRef(path, version string) *spdx.PackageExternalReference {
	return &spdx.PackageExternalReference{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL,
		Locator: "pkg:golang/" + path + "@" + version}
}

// licenceOf returns the SPDX licence expression of the licence files at the root of the
// module path@version in modCache (the IDs that licensecheck recognises over most of
// their text, joined with AND), or NOASSERTION.
func licenceOf(modCache, path, version string) string {
	ep, err1 := module.EscapePath(path)
	ev, err2 := module.EscapeVersion(version)
	if modCache == "" || err1 != nil || err2 != nil {
		return "NOASSERTION"
	}
	entries, err := os.ReadDir(filepath.Join(modCache, ep+"@"+ev))
	if err != nil {
		return "NOASSERTION"
	}
	var ids []string
	for _, e := range entries {
		n := strings.ToUpper(e.Name())
		if e.IsDir() || !(strings.HasPrefix(n, "LICENSE") || strings.HasPrefix(n, "LICENCE") || strings.HasPrefix(n, "COPYING")) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(modCache, ep+"@"+ev, e.Name()))
		if err != nil {
			continue
		}
		if c := licensecheck.Scan(text); c.Percent >= 75 {
			for _, m := range c.Match {
				if !m.IsURL && !slices.Contains(ids, m.ID) {
					ids = append(ids, m.ID)
				}
			}
		}
	}
	if len(ids) == 0 {
		return "NOASSERTION"
	}
	slices.Sort(ids)
	return strings.Join(ids, " AND ")
}

// provenanceOf is the in-toto Statement, SLSA provenance v1, of the platform image whose
// manifest digest is digest: built by hack/images from the source revision with the Go
// toolchain and flags of the build, from the modules of the binary.
func provenanceOf(name, goos, goarch string, bi *buildinfo.BuildInfo, digest v1.Hash, binSum string, src Source) ([]byte, error) {
	external, err := structpb.NewStruct(map[string]any{
		"source":   "git+" + src.URL + "@" + cmp.Or(src.Revision, "NOASSERTION"),
		"version":  src.Version,
		"platform": goos + "/" + goarch,
		"command":  "make images",
	})
	if err != nil {
		return nil, err
	}
	internal, err := structpb.NewStruct(map[string]any{
		"package": "./cmd/" + name,
		"env":     []any{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch},
		"flags":   []any{"-trimpath", "-ldflags=" + ldflags(src)},
		"dirty":   src.Dirty,
	})
	if err != nil {
		return nil, err
	}
	deps := []*intoto.ResourceDescriptor{{Uri: "git+" + src.URL, Digest: map[string]string{"gitCommit": cmp.Or(src.Revision, "0000000000000000000000000000000000000000")}}}
	deps = append(deps, &intoto.ResourceDescriptor{Name: "go", Uri: "pkg:golang/stdlib@" + bi.GoVersion})
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		rd := &intoto.ResourceDescriptor{Uri: "pkg:golang/" + m.Path + "@" + m.Version}
		// go.sum's h1: is the base64 SHA-256 of the module's file tree (dirhash); in-toto
		// digests are hex.
		if h, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
			if b, err := base64.StdEncoding.DecodeString(h); err == nil {
				rd.Digest = map[string]string{"dirHash": hex.EncodeToString(b)}
			}
		}
		deps = append(deps, rd)
	}
	prov := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            src.URL + "/hack/images@v1",
			ExternalParameters:   external,
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{
			Builder: &slsa.Builder{Id: src.URL + "/hack/images", Version: map[string]string{"go": bi.GoVersion}},
		},
	}
	if err := prov.Validate(); err != nil {
		return nil, err
	}
	pred, err := protoStruct(prov)
	if err != nil {
		return nil, err
	}
	st := &intoto.Statement{
		Type: intoto.StatementTypeUri,
		Subject: []*intoto.ResourceDescriptor{
			{Name: name, Digest: map[string]string{digest.Algorithm: digest.Hex}},
			{Name: BinDir + "/" + name, Digest: map[string]string{"sha256": binSum}},
		},
		PredicateType: ProvenancePredicate,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return compactJSON(st)
}

// protoStruct converts a protobuf message into a Struct through its JSON.
func protoStruct(m proto.Message) (*structpb.Struct, error) {
	data, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(data, s)
}

// compactJSON is protojson's encoding without the whitespace it varies on purpose, so
// that the same statement gives the same bytes (and digest).
func compactJSON(m proto.Message) ([]byte, error) {
	data, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// referrer is an OCI artifact manifest of artifactType whose one layer is content and
// whose subject is subject (config: {}).
func referrer(artifactType, title string, content []byte, subject v1.Descriptor, created time.Time) (v1.Image, error) {
	l := static.NewLayer(content, types.MediaType(artifactType))
	ld, err := partial.Descriptor(l)
	if err != nil {
		return nil, err
	}
	ld.Annotations = map[string]string{"org.opencontainers.image.title": title}
	cfgHash, _, err := v1.SHA256(bytes.NewReader(emptyConfig))
	if err != nil {
		return nil, err
	}
	subject.Platform, subject.Annotations = nil, nil
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		// The config's media type is the artifact type too (content {}), as ORAS writes
		// for registries that derive a referrer's type from the config alone.
		Config:      v1.Descriptor{MediaType: types.MediaType(artifactType), Size: int64(len(emptyConfig)), Digest: cfgHash},
		Layers:      []v1.Descriptor{*ld},
		Subject:     &subject,
		Annotations: map[string]string{"org.opencontainers.image.created": created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(artifact{raw: raw, layer: l, digest: ld.Digest})
}

// artifact is an artifact manifest as a v1.Image (for layout.AppendImage and remote.Write).
type artifact struct {
	raw    []byte
	layer  v1.Layer
	digest v1.Hash
}

func (a artifact) RawConfigFile() ([]byte, error)      { return emptyConfig, nil }
func (a artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a artifact) RawManifest() ([]byte, error)        { return a.raw, nil }
func (a artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if h != a.digest {
		return nil, fmt.Errorf("no layer %s", h)
	}
	return a.layer, nil
}
