package inventory

import (
	"fmt"
	"strings"
	"testing"
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
		o.WriteString(key + `:{"f:assessedRenderRef":{},"f:message":{},"f:state":{}}`)
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
				if _, ok := ownedElements(raw); !ok {
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
