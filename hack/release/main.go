// Command release writes the release manifests of convoy-observer:
//
//	go run ./hack/release --registry REGISTRY --version VERSION [--images bin/images] [--out dist]
//
// OUT/install.yaml is config/default rendered by kustomize (as `kubectl kustomize` does)
// with the images convoy-observer and convoy-api set to REGISTRY/NAME@sha256:DIGEST, the
// digests of IMAGES/digests (written by `make images`), and every object labelled
// app.kubernetes.io/version=VERSION. OUT/rules-library.yaml is config/rules/library (the
// opt-in rule library). Both are what `kubectl apply -f` installs; install.yaml needs
// cert-manager for the serving certificate of convoy-api (config/certmanager).
// OUT/convoy-observer-VERSION.tgz is the Helm chart charts/convoy-observer packaged with
// the same pinned images (`helm install convoy-observer convoy-observer-VERSION.tgz`).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// images are the images config/default names (and `make images` builds).
var images = []string{"convoy-observer", "convoy-api"}

func main() {
	registry := flag.String("registry", "", "repository prefix the images are pushed to (make images-push REGISTRY=…), e.g. registry.example.com/convoy")
	version := flag.String("version", "", "the release, e.g. v0.1.0")
	imagesDir := flag.String("images", "bin/images", "directory of make images' output (its digests file)")
	out := flag.String("out", "dist", "output directory")
	flag.Parse()
	if *registry == "" || *version == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/release --registry REGISTRY --version VERSION [--images bin/images] [--out dist]")
		os.Exit(2)
	}
	if err := Write(".", *imagesDir, strings.TrimSuffix(*registry, "/"), *version, *out); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s\n%s\n%s\n", filepath.Join(*out, "install.yaml"), filepath.Join(*out, "rules-library.yaml"),
		filepath.Join(*out, "convoy-observer-"+strings.TrimPrefix(*version, "v")+".tgz"))
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ReadDigests reads the "NAME@sha256:…" lines of file and returns NAME → digest; every
// image of images must be there.
func ReadDigests(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w (run make images first)", err)
	}
	d := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, digest, ok := strings.Cut(line, "@")
		if !ok || !digestRE.MatchString(digest) {
			return nil, fmt.Errorf("%s: line %q is not NAME@sha256:HEX", file, line)
		}
		d[name] = digest
	}
	for _, n := range images {
		if d[n] == "" {
			return nil, fmt.Errorf("%s: no digest of %s", file, n)
		}
	}
	return d, nil
}

// Write renders the release manifests of the repository at root into out.
func Write(root, imagesDir, registry, version, out string) error {
	digests, err := ReadDigests(filepath.Join(imagesDir, "digests"))
	if err != nil {
		return err
	}
	install, err := RenderInstall(root, registry, version, digests)
	if err != nil {
		return err
	}
	library, err := render(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "rules", "library"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	head := func(what, apply string) []byte {
		return fmt.Appendf(nil, "# convoy-observer %s: %s\n#   %s\n", version, what, apply)
	}
	if err := os.WriteFile(filepath.Join(out, "install.yaml"), append(head("config/default (needs cert-manager)", "kubectl apply --server-side -f install.yaml"), install...), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "rules-library.yaml"), append(head("the opt-in rule library (config/rules/library)", "kubectl apply -f rules-library.yaml"), library...), 0o644); err != nil {
		return err
	}
	_, err = PackageChart(root, registry, version, digests, out)
	return err
}

// RenderInstall renders config/default with the images pinned to registry/NAME@digest
// and the version label, through an overlay on a copy of config/ in memory (kustomize
// takes no absolute base, and the repository is not touched).
func RenderInstall(root, registry, version string, digests map[string]string) ([]byte, error) {
	fs := filesys.MakeFsInMemory()
	src := filepath.Join(root, "config")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return fs.WriteFile(filepath.Join("/config", rel), data)
	})
	if err != nil {
		return nil, err
	}
	var k strings.Builder
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../config/default\n")
	fmt.Fprintf(&k, "labels:\n  - pairs:\n      app.kubernetes.io/version: %q\n    includeSelectors: false\n    includeTemplates: true\n", version)
	k.WriteString("images:\n")
	for _, n := range images {
		fmt.Fprintf(&k, "  - name: %s\n    newName: %s/%s\n    digest: %s\n", n, registry, n, digests[n])
	}
	if err := fs.WriteFile("/release/kustomization.yaml", []byte(k.String())); err != nil {
		return nil, err
	}
	return render(fs, "/release")
}

func render(fs filesys.FileSystem, dir string) ([]byte, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return m.AsYaml()
}
