package inventory

import (
	"bytes"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// CompactForCache is the observer's cache transform of ReleaseInventories: it keeps of
// each managedFields entry only what ReadOwnership reads (which elements of the entries
// and hooks lists the manager owns, not the fields inside them: a third or less of the
// bytes), keeps each list in an array of its length, and makes the strings that repeat
// across entries and inventories (group, version, kind, resource, namespace, state,
// render references, the message of a rule, a hook's namespace, workload kind and
// state) share one copy each. A managedFields entry that does not parse is kept as it
// is, so ReadOwnership still says so. Anything but a ReleaseInventory is returned as it
// is.
func CompactForCache(obj any) (any, error) {
	inv, ok := obj.(*v1alpha1.ReleaseInventory)
	if !ok {
		return obj, nil
	}
	for i := range inv.ManagedFields {
		compactFields(&inv.ManagedFields[i])
	}
	// The decoder grows lists by doubling: up to half of a list's array is room that the
	// cache would keep for good (about 1 KiB for 10 entries).
	inv.Entries = exact(inv.Entries)
	inv.Hooks = exact(inv.Hooks)
	inv.ManagedFields = exact(inv.ManagedFields)
	for i := range inv.Entries {
		e := &inv.Entries[i]
		for _, s := range []*string{&e.Group, &e.Version, &e.Kind, &e.Resource, &e.Namespace, &e.RenderRef, &e.AssessedRenderRef, &e.Message} {
			*s = intern(*s)
		}
		e.State = v1alpha1.HealthState(intern(string(e.State)))
	}
	for i := range inv.Hooks {
		hk := &inv.Hooks[i]
		for _, s := range []*string{&hk.Namespace, &hk.WorkloadKind} {
			*s = intern(*s)
		}
		hk.State = v1alpha1.HookState(intern(string(hk.State)))
	}
	return inv, nil
}

// exact returns s in an array of its own length (nil for none).
func exact[T any](s []T) []T {
	if len(s) == cap(s) {
		return s
	}
	return append([]T(nil), s...)
}

// intern returns the one shared copy of s (unique.Make: dropped when nothing holds it).
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// compactFields reduces mf's field set to the list elements of entries and hooks that
// the manager owns (the paths that Ownership.EntryOwnedBy and HookOwnedBy test).
func compactFields(mf *metav1.ManagedFieldsEntry) {
	if mf.FieldsV1 == nil {
		return
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(bytes.NewReader(mf.FieldsV1.GetRawBytes())); err != nil {
		return
	}
	kept := &fieldpath.Set{}
	set.Iterate(func(p fieldpath.Path) {
		if len(p) == 2 && p[0].FieldName != nil && (*p[0].FieldName == "entries" || *p[0].FieldName == "hooks") && p[1].Key != nil {
			kept.Insert(p)
		}
	})
	raw, err := kept.ToJSON()
	if err != nil {
		return
	}
	mf.FieldsV1.SetRawBytes(raw)
}
