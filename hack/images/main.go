// Command images builds the container images of convoy-observer and convoy-api from the Go
// sources, without a container runtime and without pulling a base image, and pushes them.
//
//	go run ./hack/images build [--out bin/images] [--platforms linux/amd64,linux/arm64] [--version V]
//	go run ./hack/images push --registry REGISTRY [--out bin/images] [--version V]
//	go run ./hack/images plugin --out dist [--url URL] [--platforms …] [--version V]
//
// build compiles each binary as a static executable (CGO_ENABLED=0, -trimpath) and
// assembles, on an empty base, an image of two layers:
//
//  1. /etc/passwd and /etc/group with root and nonroot (UID and GID 65532, no login
//     shell), /etc/nsswitch.conf, /etc/ssl/certs/ca-certificates.crt (the Mozilla roots
//     of golang.org/x/crypto/x509roots/fallback, pinned by go.sum, so no file of the build
//     machine gets in), /home/nonroot and /tmp;
//  2. the binary, /usr/local/bin/NAME, the entrypoint, run as 65532:65532.
//
// There is no shell or any other program in the image. Every timestamp is the commit's
// (or $SOURCE_DATE_EPOCH), so the same commit built from a clean tree gives the same
// digests on any machine with the same Go toolchain. Each image is an OCI image index
// (one manifest per platform: linux/amd64 and linux/arm64 by default) written as an OCI
// layout to OUT/NAME, annotated with org.opencontainers.image.source, .revision, .version,
// .created and .title. Beside the index, the layout holds two OCI 1.1 referrers of each
// platform image (artifact manifests whose subject is that image): an SPDX 2.3 SBOM
// (application/spdx+json) of the binary's build information — the main module, the Go
// standard library and every module with its version, package URL and licence where the
// module cache's licence file is recognised — and an in-toto statement of SLSA provenance
// v1 (application/vnd.in-toto+json): the source revision, the build's command, flags and
// toolchain, and every module as a resolved dependency. Both are written from the commit's
// time and nothing else of the build machine, so they do not change the digests. OUT/digests
// lists "NAME@sha256:…" per image, which `make release` pins in dist/install.yaml.
//
// push copies each OUT/NAME index to REGISTRY/NAME:VERSION, and its referrers by digest
// (credentials of the Docker config, ~/.docker/config.json, as docker login writes them), and prints
// REGISTRY/NAME@DIGEST; the digest is the one built, so the pinned manifest matches.
//
// plugin archives convoyctl as the kubectl plugin kubectl-convoy, one tar.gz per platform
// (linux, darwin and windows by default), and writes the krew manifest OUT/convoy.yaml
// with each archive's URL and SHA-256 (`kubectl krew install --manifest=convoy.yaml`).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// images are the binaries shipped as images (cmd/NAME).
var images = []string{"convoy-observer", "convoy-api"}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	out := fs.String("out", "bin/images", "directory of the OCI layouts (one per image) and of the digests file")
	ver := fs.String("version", "", "image tag and org.opencontainers.image.version (default: git describe --tags --always --dirty)")
	var err error
	switch os.Args[1] {
	case "build":
		platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH list, one manifest each")
		_ = fs.Parse(os.Args[2:])
		var src Source
		if src, err = ReadSource(".", *ver); err == nil {
			var built []Built
			built, err = Build(BuildOptions{Dir: ".", Out: *out, Source: src, Platforms: strings.Split(*platforms, ",")}, os.Stderr)
			for _, b := range built {
				fmt.Printf("%s@%s\t%d bytes (%s)\n", b.Name, b.Digest, b.Size, strings.Join(b.Platforms, ", "))
			}
		}
	case "push":
		registry := fs.String("registry", "", "repository prefix to push to, e.g. registry.example.com/convoy")
		_ = fs.Parse(os.Args[2:])
		if *registry == "" {
			fmt.Fprintln(os.Stderr, "images push: --registry (REGISTRY=… for make images-push) is required")
			os.Exit(2)
		}
		var src Source
		if src, err = ReadSource(".", *ver); err == nil {
			err = Push(*out, strings.TrimSuffix(*registry, "/"), src.Version, os.Stdout)
		}
	case "plugin":
		url := fs.String("url", "", "where the archives are downloaded from (default: the repository's release download URL for the version)")
		platforms := fs.String("platforms", strings.Join(PluginPlatforms, ","), "comma-separated OS/ARCH list, one archive each")
		_ = fs.Parse(os.Args[2:])
		var src Source
		if src, err = ReadSource(".", *ver); err == nil {
			if *url == "" {
				*url = src.URL + "/releases/download/" + src.Version
			}
			var manifest string
			manifest, err = Plugin(PluginOptions{Dir: ".", Out: *out, Source: src, URL: *url, Platforms: strings.Split(*platforms, ",")}, os.Stderr)
			if err == nil {
				fmt.Println(manifest)
			}
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "images %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go run ./hack/images build|push|plugin [flags]  (see -h of each)")
	os.Exit(2)
}
