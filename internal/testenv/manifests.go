package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kumodo/convoy-observer/health/manifest"
)

// ApplyFile server-side applies every document of a YAML or JSON file as manager. The
// file is decoded as convoyctl decodes its input (health/manifest): strictly, so a key
// written twice is an error instead of a silently different rule set.
func ApplyFile(ctx context.Context, c client.Client, path, manager string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	objs, err := manifest.DecodeObjects(f)
	if err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	for i := range objs {
		u := &objs[i]
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s from %s: %w", u.GetKind(), u.GetName(), path, err)
		}
	}
	return nil
}

// RenderDefault renders config/default of the repository at root as `kubectl kustomize
// config/default` does and returns its objects in order.
func RenderDefault(root string) ([]*unstructured.Unstructured, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "default"))
	if err != nil {
		return nil, fmt.Errorf("kustomize config/default: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}
