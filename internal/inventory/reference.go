package inventory

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CheckReference returns an error when gvr, namespace and name, read from an inventory
// entry or a hook, cannot name one object of a target cluster: an empty version or
// resource, or a group, version, resource, namespace or name that is not a path segment
// (it holds "/" or "%", or is "." or ".."). Clients build the object's URL from these
// strings and clean it, so a resource such as "configmaps/../../../namespaces" would
// read another object than the one named; the loop and /health judge such an entry
// Unknown with this error as the reason instead (docs/design.md, "Per-entry
// evaluation": an entry that cannot be read is an evaluation error), and a hook's
// workload Failed ("Hook polling"). Anything else the API server refuses itself (a 404
// that names no object: the target does not serve that resource).
func CheckReference(gvr schema.GroupVersionResource, namespace, name string) error {
	if gvr.Version == "" || gvr.Resource == "" {
		return fmt.Errorf("the inventory entry has no version or resource")
	}
	var errs []string
	for _, f := range []struct{ field, value string }{
		{"group", gvr.Group}, {"version", gvr.Version}, {"resource", gvr.Resource},
		{"namespace", namespace}, {"name", name},
	} {
		if f.value == "" && f.field != "version" && f.field != "resource" && f.field != "name" {
			continue // the core group; a cluster-scoped object
		}
		errs = append(errs, prefix(f.field, f.value, content.IsPathSegmentName(f.value))...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid object reference: %s", strings.Join(errs, "; "))
	}
	return nil
}

func prefix(field, value string, errs []string) []string {
	if len(errs) == 0 {
		return nil
	}
	if len(value) > 64 {
		value = value[:64] + "…"
	}
	return []string{fmt.Sprintf("%s %q: %s", field, value, strings.Join(errs, ", "))}
}
