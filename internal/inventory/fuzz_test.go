package inventory

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// Fuzz targets for the decoders of untrusted input in this package (issue #10): the
// managedFields of a ReleaseInventory, and the times and durations that the
// controller-manager writes into it. Seeds are in testdata/fuzz; a short run:
//
//	go test -run '^$' -fuzz FuzzReadOwnership -fuzztime 30s ./internal/inventory/

// FuzzReadOwnership: any managedFields content either fails ReadOwnership with an error
// naming the manager, or gives an Ownership whose answers are consistent: every
// recorded entry is in the inventory, and an entry only the observer owns is never
// recorded.
func FuzzReadOwnership(f *testing.F) {
	for _, seed := range []string{
		`{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"}":{".":{},"f:group":{}}}}`,
		`{"f:hooks":{"k:{\"name\":\"pre\"}":{".":{},"f:name":{}}}}`,
		`{}`, `{"f:entries":{}}`, `{"f:entries":{"k:{}":{}}}`, `{"f:entries":{"v:1":{}}}`, `{"f:entries":{"i:0":{}}}`,
		`{"f:hooks":{"k:{\"name\":1}":{}}}`, `{"k:":{}}`, `[]`, `null`, `{"f:a":{"f:b":{"f:c":{".":{}}}}}`,
	} {
		f.Add([]byte(seed), []byte(`{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"}":{"f:state":{}}}}`))
	}
	f.Fuzz(func(t *testing.T, cm, obs []byte) {
		inv := &v1alpha1.ReleaseInventory{
			ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "convoy-controller-manager", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(cm))},
				{Manager: FieldManagerInventory, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(obs))},
			}},
			Entries: []v1alpha1.InventoryEntry{{Kind: "ConfigMap", Namespace: "d", Name: "a"}, {Kind: "ConfigMap", Namespace: "d", Name: "b"}},
			Hooks:   []v1alpha1.HookEntry{{Name: "pre"}},
		}
		own, err := ReadOwnership(inv)
		if err != nil {
			if !strings.Contains(err.Error(), "manager ") {
				t.Fatalf("error does not name the manager: %v", err)
			}
			return
		}
		entries, _ := own.RecordedEntries(inv, FieldManagerInventory)
		for i := range entries {
			k := KeyOf(&entries[i])
			if !own.EntryRecorded(k) {
				t.Fatalf("entry %v returned but not recorded", k)
			}
		}
		for i := range inv.Entries {
			k := KeyOf(&inv.Entries[i])
			if own.EntryRecorded(k) && !own.HasManager("convoy-controller-manager") {
				t.Fatalf("entry %v recorded without a controller-manager", k)
			}
		}
		own.RecordedHooks(inv, FieldManagerHookStatus)
	})
}

// FuzzOwnershipAsFieldpath: for any two field sets that fieldpath reads, ReadOwnership
// (which reads the sets as a stream) answers as fieldpath's sets do (referenceOwnership,
// what ReadOwnership was before) for the inventory's entries and hooks and for every
// entry and hook that the sets name; the sets as CompactForCache keeps them give the
// same answers.
func FuzzOwnershipAsFieldpath(f *testing.F) {
	for _, seed := range []string{
		`{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"}":{".":{},"f:group":{}}}}`,
		`{"f:entries":{"k:{\"kind\":\"ConfigMap\",\"namespace\":\"d\",\"name\":\"b\",\"group\":\"\"}":{}}}`,
		`{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\",\"name\":\"a\"}":{}}}`,
		`{"f:entries":{"k:{\"group\":null,\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"}":{}}}`,
		`{"f:entries":{"k:{\"gr\\u006fup\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"}":{}}}`,
		`{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"} ":{}}}`,
		`{"f:hooks":{"k:{\"name\":\"pre\"}":{".":{},"f:name":{}},"k:{\"name\":\"x\",\"y\":\"z\"}":{}}}`,
		`{"f:hooks":{"k:null":{},"k:{}":{}}}`, `{"f:hooks":{"k:{\"name\":1}":{}}}`, `{"f:entries":{"k:{\"name\":\"a\"}":{"f:state":{}}}}`,
		`{}`, `{"f:entries":{}}`, `[]`, `null`, `{"f:entries":{"v:1":{}}}`,
	} {
		f.Add([]byte(seed), []byte(`{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"b\",\"namespace\":\"d\"}":{".":{}}}}`))
	}
	f.Fuzz(func(t *testing.T, cm, obs []byte) {
		inv := &v1alpha1.ReleaseInventory{
			ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "convoy-controller-manager", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(cm))},
				{Manager: FieldManagerInventory, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(obs))},
				{Manager: "convoy-controller-manager", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{}`), Subresource: "status"},
			}},
			Entries: []v1alpha1.InventoryEntry{{Kind: "ConfigMap", Namespace: "d", Name: "a"}, {Kind: "ConfigMap", Namespace: "d", Name: "b"}},
			Hooks:   []v1alpha1.HookEntry{{Name: "pre"}},
		}
		want, err := referenceOwnership(inv)
		if err != nil {
			return // ReadOwnership checks only the keys it keeps (ownedKeys)
		}
		keys := []Key{{Kind: "ConfigMap", Namespace: "d", Name: "a"}, {Kind: "ConfigMap", Namespace: "d", Name: "b"}}
		hooks := []string{"pre", ""}
		for _, set := range want.managers {
			set.Iterate(func(p fieldpath.Path) {
				if len(p) != 2 || p[0].FieldName == nil || p[1].Key == nil {
					return
				}
				fields := map[string]string{}
				for _, fl := range *p[1].Key {
					if fl.Value.IsString() {
						fields[fl.Name] = fl.Value.AsString()
					}
				}
				switch *p[0].FieldName {
				case "entries":
					keys = append(keys, Key{Group: fields["group"], Kind: fields["kind"], Namespace: fields["namespace"], Name: fields["name"]})
				case "hooks":
					hooks = append(hooks, fields["name"])
				}
			})
		}
		got, err := ReadOwnership(inv)
		if err != nil {
			t.Fatalf("%s / %s: %v; fieldpath reads both", cm, obs, err)
		}
		compacted, err := CompactForCache(inv.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		fromCache, err := ReadOwnership(compacted.(*v1alpha1.ReleaseInventory))
		if err != nil {
			t.Fatalf("%s / %s: as the cache keeps it: %v", cm, obs, err)
		}
		for _, own := range []*Ownership{got, fromCache} {
			for _, m := range []string{"convoy-controller-manager", FieldManagerInventory, "nobody"} {
				if own.HasManager(m) != want.HasManager(m) {
					t.Fatalf("%s / %s: HasManager(%s) = %v, fieldpath %v", cm, obs, m, own.HasManager(m), want.HasManager(m))
				}
				for _, k := range keys {
					if own.EntryOwnedBy(m, k) != want.EntryOwnedBy(m, k) {
						t.Fatalf("%s / %s: EntryOwnedBy(%s, %v) = %v, fieldpath %v", cm, obs, m, k, own.EntryOwnedBy(m, k), want.EntryOwnedBy(m, k))
					}
				}
				for _, h := range hooks {
					if own.HookOwnedBy(m, h) != want.HookOwnedBy(m, h) {
						t.Fatalf("%s / %s: HookOwnedBy(%s, %q) = %v, fieldpath %v", cm, obs, m, h, own.HookOwnedBy(m, h), want.HookOwnedBy(m, h))
					}
				}
			}
			for _, k := range keys {
				if own.EntryRecorded(k) != want.EntryRecorded(k) {
					t.Fatalf("%s / %s: EntryRecorded(%v) = %v, fieldpath %v", cm, obs, k, own.EntryRecorded(k), want.EntryRecorded(k))
				}
			}
			for _, h := range hooks {
				if own.HookRecorded(h) != want.HookRecorded(h) {
					t.Fatalf("%s / %s: HookRecorded(%q) = %v, fieldpath %v", cm, obs, h, own.HookRecorded(h), want.HookRecorded(h))
				}
			}
		}
	})
}

// fieldpathOwnership is ReadOwnership as it was before it read the sets as a stream:
// each manager's sets parsed whole by fieldpath, and the paths entries[k] and hooks[k]
// looked up in them.
type fieldpathOwnership struct {
	others   *fieldpath.Set
	managers map[string]*fieldpath.Set
}

func referenceOwnership(inv *v1alpha1.ReleaseInventory) (*fieldpathOwnership, error) {
	o := &fieldpathOwnership{others: &fieldpath.Set{}, managers: map[string]*fieldpath.Set{}}
	for _, mf := range inv.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(mf.FieldsV1.GetRawBytes())); err != nil {
			return nil, err
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

func (o *fieldpathOwnership) EntryRecorded(k Key) bool      { return o.others.Has(entryPath(k)) }
func (o *fieldpathOwnership) HookRecorded(name string) bool { return o.others.Has(hookPath(name)) }
func (o *fieldpathOwnership) HasManager(m string) bool {
	_, ok := o.managers[m]
	return ok
}
func (o *fieldpathOwnership) EntryOwnedBy(m string, k Key) bool {
	s, ok := o.managers[m]
	return ok && s.Has(entryPath(k))
}
func (o *fieldpathOwnership) HookOwnedBy(m string, name string) bool {
	s, ok := o.managers[m]
	return ok && s.Has(hookPath(name))
}

// FuzzCompactFields: CompactForCache keeps of any field set that fieldpath reads
// exactly the members it holds under entries and hooks ("k:" keys), as fieldpath reads
// them (the set that compactFields reduced with fieldpath before it read the JSON as
// a stream); and what it keeps reads as a set.
func FuzzCompactFields(f *testing.F) {
	for _, seed := range []string{
		`{"f:entries":{"k:{\"group\":\"\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"namespace\":\"d\"}":{".":{},"f:group":{}}}}`,
		`{"f:entries":{"k:{\"name\":\"a\"}":{"f:state":{}},"k:{\"name\":\"b\"}":{}},"f:hooks":{"k:{\"name\":\"pre\"}":{".":{},"f:name":{}}},"f:x":{".":{}}}`,
		`{"f:entries":{"k:{\"name\":\"a\"}":{"x:y":{}}}}`, `{"f:entries":{"k:{\"name\":\"a\"}":null}}`,
		`{"f:entries":{"k:{\"name\":\"a\"}":{}},"f:entries":{"f:z":{}}}`, `{"f:entries":{"k:{\"name\":\"a\"}":{}},"f:entries":{}}`,
		`{"f:hooks":{"k:{\"name\":\"b\"}":{},"k:{\"name\":\"a\"}":{}}}`,
		`{}`, `{"f:entries":{}}`, `{"f:entries":{"k:{}":{}}}`, `{"f:entries":{"v:1":{}}}`, `{"f:entries":{"i:0":{}}}`,
		`{"f:hooks":{"k:{\"name\":1}":{}}}`, `{"k:":{}}`, `[]`, `null`, `{"f:a":{"f:b":{"f:c":{".":{}}}}}`, `{} {}`, `{"f:entries":5}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, err := ownedByFieldpath(raw)
		got, ok := ownedElementsOf(raw)
		if err != nil {
			return // kept as it is, or reduced: ReadOwnership reports a kept key that does not parse
		}
		if !ok {
			t.Fatalf("%s: not read, fieldpath reads it", raw)
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(got)); err != nil {
			t.Fatalf("%s: kept %s, which does not read: %v", raw, got, err)
		}
		if !set.Equals(want) {
			t.Fatalf("%s: kept %s, want %s", raw, set, want)
		}
	})
}

// ownedByFieldpath is what compactFields kept before it read the set as a stream: the
// set's paths entries[k] and hooks[k], by fieldpath.
func ownedByFieldpath(raw []byte) (*fieldpath.Set, error) {
	set := &fieldpath.Set{}
	if err := set.FromJSON(bytes.NewReader(raw)); err != nil {
		return nil, err
	}
	kept := &fieldpath.Set{}
	set.Iterate(func(p fieldpath.Path) {
		if len(p) == 2 && p[0].FieldName != nil && (*p[0].FieldName == "entries" || *p[0].FieldName == "hooks") && p[1].Key != nil {
			kept.Insert(p)
		}
	})
	return kept, nil
}

// crdTimePattern is the pattern that the CRD puts on every time of the inventory
// (firstUnhealthy, createdAt, finishedAt), read from the generated CRD.
func crdTimePattern(t testing.TB) *regexp.Regexp {
	t.Helper()
	f, err := os.Open("../../config/crd/bases/convoy.kumodo.io_releaseinventories.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var patterns []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "pattern: "); ok {
			patterns = append(patterns, p)
		}
	}
	if len(patterns) != 3 {
		t.Fatalf("want the 3 time patterns of the inventory CRD, found %q", patterns)
	}
	for _, p := range patterns[1:] {
		if p != patterns[0] {
			t.Fatalf("time patterns differ: %q", patterns)
		}
	}
	return regexp.MustCompile(patterns[0])
}

// FuzzTimeAdmission: every time string that the API server admits into the inventory
// (the OpenAPI date-time format and the CRD's pattern) decodes as a metav1.Time, so one
// odd time can never break the typed reads and informers of every inventory; and every
// time the observer writes is admitted.
func FuzzTimeAdmission(f *testing.F) {
	pattern := crdTimePattern(f)
	for _, seed := range []string{
		"2026-01-01T00:00:00Z", "2026-01-01T00:00:00.5+02:00", "2026-01-01t00:00:00z", "2026-12-31T23:59:60Z",
		"2026-02-30T00:00:00Z", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+99:99", "0000-01-01T00:00:00Z",
		"2026-01-01T00:00:00.000000000000000001Z", "2026-01-01T24:00:00Z", "9999-12-31T23:59:59-23:59",
	} {
		f.Add(seed, int64(0))
	}
	f.Fuzz(func(t *testing.T, s string, unix int64) {
		if strfmt.IsDateTime(s) && pattern.MatchString(s) {
			var mt metav1.Time
			b, _ := json.Marshal(s)
			if err := json.Unmarshal(b, &mt); err != nil {
				t.Fatalf("%q is admitted by the CRD but metav1.Time cannot decode it: %v", s, err)
			}
		}
		// What the observer writes: a clock time, to the second, in UTC.
		tm := time.Unix(unix%253402300800, 0).UTC() // years 1970..9999
		if tm.Year() < 0 {
			return
		}
		out := tm.Format(time.RFC3339)
		if tm.Year() >= 1000 && (!pattern.MatchString(out) || !strfmt.IsDateTime(out)) {
			t.Fatalf("the observer writes %q, which the CRD rejects", out)
		}
	})
}

// FuzzHookTimeout: any timeout string gives a positive duration (the default 10m for
// an empty, unparsable or non-positive one) and never panics.
func FuzzHookTimeout(f *testing.F) {
	for _, seed := range []string{"", "10m", "90s", "0s", "-1m", "1h2m3.5s", "9223372036854775807ns", "99999999999h", "1e3s", "١m"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := v1alpha1.HookEntry{Timeout: s}
		if d := h.GetTimeout(); d <= 0 {
			t.Fatalf("timeout %q gives %v", s, d)
		}
	})
}
