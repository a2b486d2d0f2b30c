package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	jsoniter "github.com/json-iterator/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// benchFieldsV1 returns the two field sets of an inventory of n Deployments as the API
// server writes them: the controller-manager's (each entry and its fields) and the
// observer's entries apply (each entry's state, message and assessed render).
func benchFieldsV1(n int) (cm, obs []byte) {
	var c, o strings.Builder
	c.WriteString(`{"f:entries":{`)
	o.WriteString(`{"f:entries":{`)
	for i := range n {
		if i > 0 {
			c.WriteString(",")
			o.WriteString(",")
		}
		key := fmt.Sprintf(`"k:{\"group\":\"apps\",\"kind\":\"Deployment\",\"name\":\"d%d\",\"namespace\":\"bench-0\"}"`, i)
		c.WriteString(key + `:{".":{},"f:group":{},"f:kind":{},"f:name":{},"f:namespace":{},"f:renderRef":{},"f:resource":{},"f:version":{}}`)
		o.WriteString(key + `:{".":{},"f:assessedRenderRef":{},"f:group":{},"f:kind":{},"f:message":{},"f:name":{},"f:namespace":{},"f:state":{}}`)
	}
	c.WriteString(`},"f:renderRef":{}}`)
	o.WriteString(`}}`)
	return []byte(c.String()), []byte(o.String())
}

// BenchmarkCompactFields: the transform's reduction of one inventory's two field sets
// (10 entries), read as a stream (ownedElements) and, for comparison, parsed and
// serialized by fieldpath (what it did before).
func BenchmarkCompactFields(b *testing.B) {
	cm, obs := benchFieldsV1(10)
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, raw := range [][]byte{cm, obs} {
				if _, ok := ownedElementsOf(raw); !ok {
					b.Fatal("not read")
				}
			}
		}
	})
	b.Run("fieldpath", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, raw := range [][]byte{cm, obs} {
				kept, err := ownedByFieldpath(raw)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := kept.ToJSON(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkReadOwnership: what a pass reads of a cached 10-entry inventory's
// managedFields (the sets as CompactForCache keeps them), read as a stream
// (ReadOwnership) and, for comparison, parsed by fieldpath (what it did before).
func BenchmarkReadOwnership(b *testing.B) {
	inv := &v1alpha1.ReleaseInventory{}
	if err := json.Unmarshal(storedInventory(1, 10), inv); err != nil {
		b.Fatal(err)
	}
	if _, err := CompactForCache(inv); err != nil {
		b.Fatal(err)
	}
	k := KeyOf(&inv.Entries[3])
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o, err := ReadOwnership(inv)
			if err != nil || !o.EntryRecorded(k) {
				b.Fatal("not recorded", err)
			}
		}
	})
	b.Run("fieldpath", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o, err := referenceOwnership(inv)
			if err != nil || !o.EntryRecorded(k) {
				b.Fatal("not recorded", err)
			}
		}
	})
}

// ownedElementsOf is ownedElements into a buffer of its own.
func ownedElementsOf(raw []byte) ([]byte, bool) {
	stream := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(stream)
	if !ownedElements(raw, stream) {
		return nil, false
	}
	return bytes.Clone(stream.Buffer()), true
}

// storedInventory returns inventory i of n Deployments as the API server stores it once
// the observer has assessed it: the controller-manager's entries, the observer's
// states, messages and (for the Progressing half) the deciding rule, and both managers'
// field sets.
func storedInventory(i, n int) []byte {
	cm, obs := benchFieldsV1(n)
	var entries []string
	for j := range n {
		decided := ""
		state := "Healthy"
		if j%2 == 1 {
			state = "Progressing"
			decided = `,"decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"convoy-defaults","rule":3,"cause":"RuleFailed"}`
		}
		entries = append(entries, fmt.Sprintf(`{"group":"apps","version":"v1","kind":"Deployment","resource":"deployments","namespace":"bench-0","name":"d%d","wave":0,"renderRef":"r1","state":%q,"message":"1/1 available, 1 updated","assessedRenderRef":"r1","rulesApplied":1%s}`, j, state, decided))
	}
	return fmt.Appendf(nil, `{"apiVersion":"convoy.kumodo.io/v1alpha1","kind":"ReleaseInventory","metadata":{"name":"r%d","namespace":"bench-0","uid":"6f1c1f0e-7d36-4a43-9a7e-2d3b1f0c%04d","resourceVersion":"%d","managedFields":[`+
		`{"manager":"convoy-controller-manager","operation":"Apply","apiVersion":"convoy.kumodo.io/v1alpha1","time":"2026-12-07T01:00:00Z","fieldsType":"FieldsV1","fieldsV1":%s},`+
		`{"manager":%q,"operation":"Apply","apiVersion":"convoy.kumodo.io/v1alpha1","time":"2026-12-07T01:00:01Z","fieldsType":"FieldsV1","fieldsV1":%s}]},"entries":[%s]}`,
		i, i%10000, 1000+i, cm, FieldManagerInventory, obs, strings.Join(entries, ","))
}

// TestCompactForCacheKeepsEqualSetsOnce: the two managers that own the same entries
// keep one reduced set between them; sets that differ stay apart; and the answers of
// ReadOwnership are those of the inventory before.
func TestCompactForCacheKeepsEqualSetsOnce(t *testing.T) {
	inv := &v1alpha1.ReleaseInventory{}
	if err := json.Unmarshal(storedInventory(1, 3), inv); err != nil {
		t.Fatal(err)
	}
	before, err := ReadOwnership(inv.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CompactForCache(inv); err != nil {
		t.Fatal(err)
	}
	if inv.ManagedFields[0].FieldsV1 != inv.ManagedFields[1].FieldsV1 {
		t.Errorf("equal sets kept twice: %s and %s", inv.ManagedFields[0].FieldsV1, inv.ManagedFields[1].FieldsV1)
	}
	after, err := ReadOwnership(inv)
	if err != nil {
		t.Fatal(err)
	}
	for i := range inv.Entries {
		k := KeyOf(&inv.Entries[i])
		if before.EntryRecorded(k) != after.EntryRecorded(k) || before.EntryOwnedBy(FieldManagerInventory, k) != after.EntryOwnedBy(FieldManagerInventory, k) {
			t.Errorf("entry %v: the compacted inventory answers otherwise", k)
		}
		if !after.EntryRecorded(k) || !after.EntryOwnedBy(FieldManagerInventory, k) {
			t.Errorf("entry %v: not recorded and owned", k)
		}
	}

	// The observer owns one entry fewer: two sets.
	inv = &v1alpha1.ReleaseInventory{}
	if err := json.Unmarshal(storedInventory(1, 3), inv); err != nil {
		t.Fatal(err)
	}
	_, obs := benchFieldsV1(2)
	inv.ManagedFields[1].FieldsV1 = metav1.NewFieldsV1(string(obs))
	if _, err := CompactForCache(inv); err != nil {
		t.Fatal(err)
	}
	if inv.ManagedFields[0].FieldsV1 == inv.ManagedFields[1].FieldsV1 {
		t.Error("different sets kept as one")
	}
	own, err := ReadOwnership(inv)
	if err != nil {
		t.Fatal(err)
	}
	if k := KeyOf(&inv.Entries[2]); !own.EntryRecorded(k) || own.EntryOwnedBy(FieldManagerInventory, k) {
		t.Errorf("entry %v: recorded %v, owned by the observer %v", k, own.EntryRecorded(k), own.EntryOwnedBy(FieldManagerInventory, k))
	}
}

// BenchmarkCachedInventory: the live heap that the cache keeps per entry of a
// 10-entry inventory (decoded from JSON, then CompactForCache), as "bytes/entry".
func BenchmarkCachedInventory(b *testing.B) {
	const inventories, entries = 2000, 10
	raws := make([][]byte, inventories)
	for i := range raws {
		raws[i] = storedInventory(i, entries)
	}
	for b.Loop() {
		kept := make([]any, inventories)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for i, raw := range raws {
			inv := &v1alpha1.ReleaseInventory{}
			if err := json.Unmarshal(raw, inv); err != nil {
				b.Fatal(err)
			}
			obj, err := CompactForCache(inv)
			if err != nil {
				b.Fatal(err)
			}
			kept[i] = obj
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(inventories*entries), "bytes/entry")
		runtime.KeepAlive(kept)
	}
}

// TestCompactFieldsDeepSet: a set nested deeper than the JSON reader goes is kept as it
// is (ReadOwnership then reports it), without exhausting the stack.
func TestCompactFieldsDeepSet(t *testing.T) {
	const depth = 1_000_000
	raw := `{"f:entries":{"k:{\"name\":\"a\"}":` + strings.Repeat(`{"f:x":`, depth) + "{}" + strings.Repeat("}", depth) + "}}"
	if got, ok := ownedElementsOf([]byte(raw)); ok {
		t.Fatalf("a set %d deep read as %.100s", depth, got)
	}
	inv := &v1alpha1.ReleaseInventory{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "convoy-controller-manager", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw)}}}}
	if _, err := CompactForCache(inv); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadOwnership(inv); err == nil {
		t.Fatal("ReadOwnership read a set nested a million deep")
	}
}
