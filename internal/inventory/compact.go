package inventory

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"unique"

	jsoniter "github.com/json-iterator/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		mf := &inv.ManagedFields[i]
		compactFields(mf)
		for _, s := range []*string{&mf.Manager, &mf.APIVersion, &mf.FieldsType, &mf.Subresource} {
			*s = intern(*s)
		}
		mf.Operation = metav1.ManagedFieldsOperationType(intern(string(mf.Operation)))
		// The controller-manager and the observer's entries apply own the same elements:
		// their reduced sets are the same bytes, kept once (the cache's objects are
		// read, never changed).
		for j := range i {
			if other := inv.ManagedFields[j].FieldsV1; other != nil && mf.FieldsV1 != nil &&
				bytes.Equal(other.GetRawBytes(), mf.FieldsV1.GetRawBytes()) {
				mf.FieldsV1 = other
				break
			}
		}
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
		if d := e.DecidedBy; d != nil {
			for _, s := range []*string{&d.Kind, &d.Namespace, &d.Name, &d.Cause} {
				*s = intern(*s)
			}
		}
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
// the manager owns (the paths that Ownership.EntryOwnedBy and HookOwnedBy test). A set
// that does not read as FieldsV1 is kept as it is.
func compactFields(mf *metav1.ManagedFieldsEntry) {
	if mf.FieldsV1 == nil {
		return
	}
	stream := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(stream)
	if ownedElements(mf.FieldsV1.GetRawBytes(), stream) {
		mf.FieldsV1.SetRawBytes(stream.Buffer()) // a copy of its own length
	}
}

// ownedLists are the lists whose elements ownedElements keeps, in the order that
// FieldsV1 sorts them.
var ownedLists = [...]string{"f:entries", "f:hooks"}

// ownedElements writes to stream, from the FieldsV1 set raw, the set of the elements of
// the entries and hooks lists ("k:" keys) that it holds as members (ownedKeys), in
// FieldsV1 ("{}" for none); false (and nothing written) when raw is not a JSON object.
func ownedElements(raw []byte, stream *jsoniter.Stream) bool {
	kept, ok := ownedKeys(raw)
	if !ok {
		return false
	}
	stream.WriteObjectStart()
	first := true
	for list, keys := range kept {
		if len(keys) == 0 {
			continue
		}
		if !first {
			stream.WriteMore()
		}
		first = false
		stream.WriteObjectField(ownedLists[list])
		stream.WriteObjectStart()
		for i, key := range keys {
			if i > 0 {
				stream.WriteMore()
			}
			stream.WriteObjectField(key)
			stream.WriteEmptyObject()
		}
		stream.WriteObjectEnd()
	}
	stream.WriteObjectEnd()
	return true
}

// ownedKeys returns, of the FieldsV1 set raw, the "k:" keys of the elements of each of
// ownedLists that the set holds as members, in the set's order; false when raw is not a
// JSON object (or has data after it).
//
// It reads raw as a stream and keeps only those keys, instead of parsing the whole set
// (every field of every entry): the cache's transform runs on every watch event of an
// inventory, one of them per write of the observer's own fields, and ReadOwnership on
// every pass. An element is a member of the set when its object holds "." or no field
// (FieldsV1's leaf) or, as fieldpath reads it, only keys of types it does not know.
// The API server stores every set as fieldpath serializes it (keys sorted, once each),
// and this reads such a set as fieldpath.Set.FromJSON does; of anything else it
// checks only the JSON and the kept keys' places, and ReadOwnership reports a kept
// key that does not parse.
func ownedKeys(raw []byte) (kept [len(ownedLists)][]string, ok bool) {
	iter := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowIterator(raw)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnIterator(iter)
	iter.ReadMapCB(func(iter *jsoniter.Iterator, field string) bool {
		list := slices.Index(ownedLists[:], field)
		if list < 0 {
			iter.Skip()
			return true
		}
		var keys []string
		listKnown := false // a list repeated with a known key replaces the one before, as in fieldpath
		ok := iter.ReadMapCB(func(iter *jsoniter.Iterator, key string) bool {
			if knownKey(key) {
				listKnown = true
			}
			if !strings.HasPrefix(key, "k:") {
				iter.Skip()
				return true
			}
			dot, known := false, false
			ok := iter.ReadMapCB(func(iter *jsoniter.Iterator, child string) bool {
				switch {
				case child == ".":
					dot = true
				case knownKey(child):
					known = true
				}
				iter.Skip()
				return true
			})
			if ok && (dot || !known) {
				keys = append(keys, key)
			}
			return ok
		})
		if listKnown {
			kept[list] = keys
		}
		return ok
	})
	if iter.Error != nil {
		return kept, false
	}
	if iter.WhatIsNext(); iter.Error != io.EOF {
		return kept, false // trailing data
	}
	return kept, true
}

// knownKey reports whether key is of a path element type that fieldpath knows (a field,
// key, value or index); fieldpath drops the others as it reads.
func knownKey(key string) bool {
	return len(key) >= 2 && key[1] == ':' && strings.IndexByte("fkvi", key[0]) >= 0
}
