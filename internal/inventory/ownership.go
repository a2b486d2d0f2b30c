package inventory

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// IsObserverManager reports whether manager is one of the observer's field managers.
func IsObserverManager(manager string) bool {
	switch manager {
	case FieldManagerInventory, FieldManagerHealth, FieldManagerHookStatus, FieldManagerSyncOwed:
		return true
	}
	return false
}

// Ownership tells which elements of an inventory's lists each kind of manager owns,
// from the inventory's managedFields.
type Ownership struct {
	others   *fieldpath.Set // union of the sets of every non-observer manager
	managers map[string]*fieldpath.Set
}

// ReadOwnership parses the managedFields of inv. An unparsable entry is an error: the
// caller must not guess which entries are recorded.
func ReadOwnership(inv *v1alpha1.ReleaseInventory) (*Ownership, error) {
	o := &Ownership{others: &fieldpath.Set{}, managers: map[string]*fieldpath.Set{}}
	for _, mf := range inv.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(mf.FieldsV1.GetRawBytes())); err != nil {
			return nil, fmt.Errorf("parsing managedFields of manager %s: %w", mf.Manager, err)
		}
		if prev, ok := o.managers[mf.Manager]; ok {
			set = prev.Union(set)
		}
		o.managers[mf.Manager] = set
		if !IsObserverManager(mf.Manager) {
			o.others = o.others.Union(set)
		}
	}
	return o, nil
}

func entryPath(k Key) fieldpath.Path {
	return fieldpath.MakePathOrDie("entries", fieldpath.KeyByFields(
		"group", k.Group, "kind", k.Kind, "namespace", k.Namespace, "name", k.Name))
}

func hookPath(name string) fieldpath.Path {
	return fieldpath.MakePathOrDie("hooks", fieldpath.KeyByFields("name", name))
}

// EntryRecorded reports whether a manager other than the observer's owns the entry k.
func (o *Ownership) EntryRecorded(k Key) bool { return o.others.Has(entryPath(k)) }

// HookRecorded reports whether a manager other than the observer's owns the hook name.
func (o *Ownership) HookRecorded(name string) bool { return o.others.Has(hookPath(name)) }

// EntryOwnedBy reports whether manager owns the entry k.
func (o *Ownership) EntryOwnedBy(manager string, k Key) bool {
	s, ok := o.managers[manager]
	return ok && s.Has(entryPath(k))
}

// HookOwnedBy reports whether manager owns the hook name.
func (o *Ownership) HookOwnedBy(manager string, name string) bool {
	s, ok := o.managers[manager]
	return ok && s.Has(hookPath(name))
}

// HasManager reports whether manager has a managedFields entry.
func (o *Ownership) HasManager(manager string) bool {
	_, ok := o.managers[manager]
	return ok
}

// RecordedEntries returns the entries of inv that the controller-manager records, and
// whether manager still owns an entry that it does not (a leftover that the manager's
// next apply must drop).
func RecordedEntries(inv *v1alpha1.ReleaseInventory, manager string) ([]v1alpha1.InventoryEntry, bool, error) {
	o, err := ReadOwnership(inv)
	if err != nil {
		return nil, false, err
	}
	entries, stale := o.RecordedEntries(inv, manager)
	return entries, stale, nil
}

// RecordedHooks is RecordedEntries for the hooks list.
func RecordedHooks(inv *v1alpha1.ReleaseInventory, manager string) ([]v1alpha1.HookEntry, bool, error) {
	o, err := ReadOwnership(inv)
	if err != nil {
		return nil, false, err
	}
	hooks, stale := o.RecordedHooks(inv, manager)
	return hooks, stale, nil
}

// RecordedEntries is the package function for an inventory whose ownership o was read
// from (so one pass parses the managedFields once).
func (o *Ownership) RecordedEntries(inv *v1alpha1.ReleaseInventory, manager string) ([]v1alpha1.InventoryEntry, bool) {
	out := make([]v1alpha1.InventoryEntry, 0, len(inv.Entries)) // most are recorded
	stale := false
	for i := range inv.Entries {
		k := KeyOf(&inv.Entries[i])
		if o.EntryRecorded(k) {
			out = append(out, inv.Entries[i])
		} else if o.EntryOwnedBy(manager, k) {
			stale = true
		}
	}
	return out, stale
}

// RecordedHooks is RecordedEntries for the hooks list.
func (o *Ownership) RecordedHooks(inv *v1alpha1.ReleaseInventory, manager string) ([]v1alpha1.HookEntry, bool) {
	var out []v1alpha1.HookEntry
	stale := false
	for i := range inv.Hooks {
		if o.HookRecorded(inv.Hooks[i].Name) {
			out = append(out, inv.Hooks[i])
		} else if o.HookOwnedBy(manager, inv.Hooks[i].Name) {
			stale = true
		}
	}
	return out, stale
}
