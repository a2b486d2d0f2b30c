package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push copies the image index of each OUT/NAME layout to REGISTRY/NAME:VERSION and prints
// REGISTRY/NAME@DIGEST per image to w.
func Push(out, registry, version string, w io.Writer) error {
	for _, n := range images {
		p, err := layout.FromPath(filepath.Join(out, n))
		if err != nil {
			return fmt.Errorf("%s: %w (run make images first)", n, err)
		}
		root, err := p.ImageIndex()
		if err != nil {
			return err
		}
		m, err := root.IndexManifest()
		if err != nil {
			return err
		}
		// The tagged image index, and the referrers (SBOM, provenance) of its images.
		var tagged []v1.Descriptor
		var referrers []v1.Descriptor
		for _, d := range m.Manifests {
			if d.MediaType.IsIndex() {
				tagged = append(tagged, d)
			} else {
				referrers = append(referrers, d)
			}
		}
		if len(tagged) != 1 {
			return fmt.Errorf("%s: the layout holds %d indexes, want 1", n, len(tagged))
		}
		idx, err := root.ImageIndex(tagged[0].Digest)
		if err != nil {
			return err
		}
		ref, err := name.NewTag(registry + "/" + n + ":" + version)
		if err != nil {
			return err
		}
		auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
		if err := remote.WriteIndex(ref, idx, auth); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		// By digest: a registry with the referrers API indexes them by their subject;
		// for one without, remote.Write keeps the fallback tag sha256-SUBJECT up to date.
		for _, d := range referrers {
			img, err := root.Image(d.Digest)
			if err != nil {
				return err
			}
			rref, err := name.NewDigest(registry + "/" + n + "@" + d.Digest.String())
			if err != nil {
				return err
			}
			if err := remote.Write(rref, img, auth); err != nil {
				return fmt.Errorf("pushing %s: %w", rref, err)
			}
		}
		fmt.Fprintf(w, "%s/%s@%s\n", registry, n, tagged[0].Digest)
	}
	return nil
}
