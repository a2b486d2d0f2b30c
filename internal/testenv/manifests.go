package testenv

import (
	"context"
	"fmt"
	"os"

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
