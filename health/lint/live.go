package lint

import (
	"fmt"
	"reflect"
	"regexp"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Lint types object as the evaluator sees it: an unstructured object, read as dyn. The
// schema says which fields exist and what they hold, but a few of its features mean
// something else on a live object than the API server's CEL typing assumes:
//
//   - x-kubernetes-preserve-unknown-fields (RawExtension, JSONSchemaProps, Helm-values
//     fields): any field may be there, so the node is dyn, not an object of its declared
//     properties only;
//   - x-kubernetes-embedded-resource: the embedded object has a whole ObjectMeta
//     (labels, annotations…), not only name and generateName;
//   - type number: a JSON number without a fraction is an int on a live object, with one a
//     double. The rule is checked twice: with numbers as dyn (so `successRate == 1` is
//     accepted) and with numbers as int (so `successRate * 100.0`, which fails for every
//     whole value, is rejected);
//   - nullable: the value may be null, so the node is dyn;
//   - property names that are not CEL identifiers (max-unavailable): the API server
//     escapes them (max__dash__unavailable) in validation rules; the loop has no such
//     escaping, so the object holding them is dyn (object.spec['max-unavailable'] works)
//     and an escaped name is an error (escapedNames).

// numbersAs says how liveSchema types `type: number`.
type numbersAs int

const (
	numbersDyn numbersAs = iota
	numbersInt
)

const (
	extPreserveUnknown = "x-kubernetes-preserve-unknown-fields"
	extEmbedded        = "x-kubernetes-embedded-resource"
	extIntOrString     = "x-kubernetes-int-or-string"
)

// objectMetaSchema is the schema of a whole ObjectMeta.
var objectMetaSchema = sync.OnceValue(func() *spec.Schema {
	return schemaOf(reflect.TypeFor[metav1.ObjectMeta](), map[reflect.Type]bool{})
})

// dynSchema is a node that the API server's CEL typing reads as dyn.
func dynSchema() *spec.Schema {
	s := &spec.Schema{}
	s.AddExtension(extIntOrString, true)
	return s
}

// celIdentifier matches the property names that CEL can select without an index.
var celIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// liveSchema returns a copy of s typed as a live object is read (see above), without
// format anywhere (a date-time is a string on an unstructured object).
func liveSchema(s *spec.Schema, numbers numbersAs, depth int) *spec.Schema {
	if s == nil {
		return nil
	}
	if depth > 200 {
		return dynSchema()
	}
	if b, ok := s.Extensions.GetBool(extPreserveUnknown); ok && b {
		return dynSchema()
	}
	if s.Nullable {
		return dynSchema()
	}
	c := *s
	c.Format = ""
	if s.Type.Contains("number") {
		if numbers == numbersDyn {
			return dynSchema()
		}
		c.Type = spec.StringOrArray{"integer"}
	}
	if b, ok := s.Extensions.GetBool(extEmbedded); ok && b {
		c.Extensions = spec.Extensions{}
		for k, v := range s.Extensions {
			if k != extEmbedded {
				c.Extensions[k] = v
			}
		}
		props := make(map[string]spec.Schema, len(s.Properties)+3)
		for k, v := range s.Properties {
			props[k] = v
		}
		props["metadata"] = *objectMetaSchema()
		props["apiVersion"] = *typed("string")
		props["kind"] = *typed("string")
		s = &spec.Schema{SchemaProps: spec.SchemaProps{Properties: props}}
	}
	if s.Properties != nil {
		c.Properties = make(map[string]spec.Schema, len(s.Properties))
		for k, v := range s.Properties {
			if !celIdentifier.MatchString(k) {
				return dynSchema()
			}
			c.Properties[k] = *liveSchema(&v, numbers, depth+1)
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		c.Items = &spec.SchemaOrArray{Schema: liveSchema(s.Items.Schema, numbers, depth+1)}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		c.AdditionalProperties = &spec.SchemaOrBool{Allows: s.AdditionalProperties.Allows, Schema: liveSchema(s.AdditionalProperties.Schema, numbers, depth+1)}
	}
	if len(s.AllOf) > 0 {
		c.AllOf = make([]spec.Schema, len(s.AllOf))
		for i := range s.AllOf {
			c.AllOf[i] = *liveSchema(&s.AllOf[i], numbers, depth+1)
		}
	}
	return &c
}

// escapedRE finds a selection of a name in the API server's escaping.
var escapedRE = regexp.MustCompile(`\.\s*([A-Za-z_][A-Za-z0-9_]*__(?:dash|dot|slash|underscores|[a-z]+)__[A-Za-z0-9_]*)`)

// escapedNames reports selections written in the API server's escaping of property
// names, which never match on a live object.
func escapedNames(expr string) []string {
	var out []string
	for _, m := range escapedRE.FindAllStringSubmatch(expr, -1) {
		out = append(out, fmt.Sprintf("%s is the API server's escaping of a property name, which health rules do not have: it is always \"no such key\" on a live object; select the name with an index, e.g. ['max-unavailable']", m[1]))
	}
	return out
}
