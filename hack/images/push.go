package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
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
		if len(m.Manifests) != 1 {
			return fmt.Errorf("%s: the layout holds %d indexes, want 1", n, len(m.Manifests))
		}
		idx, err := root.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			return err
		}
		ref, err := name.NewTag(registry + "/" + n + ":" + version)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		fmt.Fprintf(w, "%s/%s@%s\n", registry, n, m.Manifests[0].Digest)
	}
	return nil
}
