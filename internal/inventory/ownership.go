package inventory

import (
	"fmt"
	"io"
	"strings"

	jsoniter "github.com/json-iterator/go"

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
// from the inventory's managedFields. Its zero value is an inventory that no manager
// owns any element of.
type Ownership struct {
	others   owned // of every manager but the observer's
	managers map[string]*owned
}

// owned is the elements of the entries list (by their four keys) and of the hooks list
// (by name) that one manager, or several, own.
type owned struct {
	entries map[Key]struct{}
	hooks   map[string]struct{}
}

func (w *owned) addEntry(k Key) {
	if w.entries == nil {
		w.entries = map[Key]struct{}{}
	}
	w.entries[k] = struct{}{}
}

func (w *owned) addHook(name string) {
	if w.hooks == nil {
		w.hooks = map[string]struct{}{}
	}
	w.hooks[name] = struct{}{}
}

func (w *owned) hasEntry(k Key) bool {
	_, ok := w.entries[k]
	return ok
}

func (w *owned) hasHook(name string) bool {
	_, ok := w.hooks[name]
	return ok
}

// ReadOwnership reads from the managedFields of inv which elements of its entries and
// hooks lists each manager owns (ownedKeys: the "k:" members of those lists, the
// paths fieldpath would find in the set). An entry is owned when a key names it by
// exactly its four fields, group, kind, namespace and name, each a string (the
// observer and the controller-manager apply all four, "" too); a hook, by its name
// alone. A key of any other shape names no element that the loop asks about, and is
// only checked to parse. A field set that is not a JSON object, or a kept key that does
// not parse as fieldpath's path element, is an error: the caller must not guess which
// entries are recorded.
func ReadOwnership(inv *v1alpha1.ReleaseInventory) (*Ownership, error) {
	o := &Ownership{managers: map[string]*owned{}}
	for _, mf := range inv.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		kept, ok := ownedKeys(mf.FieldsV1.GetRawBytes())
		if !ok {
			return nil, fmt.Errorf("parsing managedFields of manager %s: the field set is not a JSON object", mf.Manager)
		}
		w := o.managers[mf.Manager]
		if w == nil {
			w = &owned{}
			o.managers[mf.Manager] = w
		}
		other := !IsObserverManager(mf.Manager)
		for _, key := range kept[0] {
			k, isEntry, err := entryKey(key)
			if err != nil {
				return nil, fmt.Errorf("parsing managedFields of manager %s: %w", mf.Manager, err)
			}
			if isEntry {
				w.addEntry(k)
				if other {
					o.others.addEntry(k)
				}
			}
		}
		for _, key := range kept[1] {
			name, isHook, err := hookKey(key)
			if err != nil {
				return nil, fmt.Errorf("parsing managedFields of manager %s: %w", mf.Manager, err)
			}
			if isHook {
				w.addHook(name)
				if other {
					o.others.addHook(name)
				}
			}
		}
	}
	return o, nil
}

// entryKey reads the "k:" key of an element of the entries list: the entry's Key when
// the key is an object of exactly group, kind, namespace and name, each a string once;
// isEntry false for a key of another shape, which is checked with fieldpath.
func entryKey(key string) (k Key, isEntry bool, err error) {
	var seen [4]bool
	isEntry = readKeyFields(key, func(field, value string) bool {
		var i int
		switch field {
		case "group":
			i, k.Group = 0, value
		case "kind":
			i, k.Kind = 1, value
		case "namespace":
			i, k.Namespace = 2, value
		case "name":
			i, k.Name = 3, value
		default:
			return false
		}
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	})
	if isEntry && seen == [4]bool{true, true, true, true} {
		return k, true, nil
	}
	return Key{}, false, checkKey(key)
}

// hookKey is entryKey for the hooks list, whose elements are keyed by name alone.
func hookKey(key string) (name string, isHook bool, err error) {
	n := 0
	isHook = readKeyFields(key, func(field, value string) bool {
		name = value
		n++
		return field == "name" && n == 1
	})
	if isHook && n == 1 {
		return name, true, nil
	}
	return "", false, checkKey(key)
}

// readKeyFields calls field for each member of the JSON object after "k:" in key, as
// long as it returns true; false when key is not such an object of string values, when
// field returned false, or when the object does not end where key does.
func readKeyFields(key string, field func(name, value string) bool) bool {
	raw, ok := strings.CutPrefix(key, "k:")
	if !ok {
		return false
	}
	iter := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowIterator([]byte(raw))
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnIterator(iter)
	if iter.WhatIsNext() != jsoniter.ObjectValue {
		return false
	}
	all := true
	iter.ReadObjectCB(func(iter *jsoniter.Iterator, name string) bool {
		if iter.WhatIsNext() != jsoniter.StringValue || !field(name, iter.ReadString()) {
			all = false
			return false
		}
		return true
	})
	if !all || iter.Error != nil {
		return false
	}
	iter.WhatIsNext()
	return iter.Error == io.EOF
}

// checkKey returns fieldpath's error for a kept key that does not parse as a path
// element.
func checkKey(key string) error {
	_, err := fieldpath.DeserializePathElement(key)
	return err
}

// EntryRecorded reports whether a manager other than the observer's owns the entry k.
func (o *Ownership) EntryRecorded(k Key) bool { return o.others.hasEntry(k) }

// HookRecorded reports whether a manager other than the observer's owns the hook name.
func (o *Ownership) HookRecorded(name string) bool { return o.others.hasHook(name) }

// EntryOwnedBy reports whether manager owns the entry k.
func (o *Ownership) EntryOwnedBy(manager string, k Key) bool {
	w, ok := o.managers[manager]
	return ok && w.hasEntry(k)
}

// HookOwnedBy reports whether manager owns the hook name.
func (o *Ownership) HookOwnedBy(manager string, name string) bool {
	w, ok := o.managers[manager]
	return ok && w.hasHook(name)
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
