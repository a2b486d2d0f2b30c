package lint

import (
	"reflect"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Builtin is the SchemaSource of the Kubernetes API's built-in kinds, offline: the Go
// types of client-go's scheme plus the two groups that the kube-apiserver serves from
// outside it, apiextensions.k8s.io/v1 (CustomResourceDefinition) and
// apiregistration.k8s.io/v1 (APIService, from k8s.io/kube-aggregator), turned into schemas by
// reflection over their JSON tags. It knows every group of that scheme, so a rule for
// a version or resource of a built-in group that Kubernetes does not serve (for example
// autoscaling/v2beta2, removed in 1.26) is UnknownResource; other groups are NoSchema.
//
// A field is required in these schemas when the API server always serializes it: no
// omitempty, or a struct value (encoding/json never omits one). Formats are left out:
// rules see date-times and quantities as the strings of the unstructured object.
type Builtin struct {
	once   sync.Once
	scheme *runtime.Scheme
	groups map[string]bool
	kinds  map[schema.GroupVersionResource]schema.GroupVersionKind
	cache  sync.Map // GroupVersionKind → *spec.Schema
}

// init builds the scheme and the resource → kind index once. The scheme holds no
// plurals; built-in kinds follow the API server's naming convention, which
// meta.UnsafeGuessKindToResource implements.
func (b *Builtin) init() {
	b.once.Do(func() {
		b.scheme = runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(b.scheme)
		_ = apiextensionsv1.AddToScheme(b.scheme)
		_ = apiregistrationv1.AddToScheme(b.scheme)
		b.groups = map[string]bool{}
		b.kinds = map[schema.GroupVersionResource]schema.GroupVersionKind{}
		for gvk, t := range b.scheme.AllKnownTypes() {
			if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") ||
				strings.HasSuffix(gvk.Kind, "Options") || gvk.Kind == "WatchEvent" || gvk.Kind == "Status" {
				continue
			}
			if f, ok := t.FieldByName("ObjectMeta"); !ok || f.Type != reflect.TypeFor[metav1.ObjectMeta]() {
				continue // not a resource of its own (for example a review or a scale subresource)
			}
			b.groups[gvk.Group] = true
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			b.kinds[plural] = gvk
		}
	})
}

// Lookup returns the schema of the built-in resource gv/resource.
func (b *Builtin) Lookup(gv schema.GroupVersion, resource string) (*spec.Schema, schema.GroupVersionKind, Resolution, error) {
	b.init()
	gvk, ok := b.kinds[gv.WithResource(resource)]
	if !ok {
		if b.groups[gv.Group] {
			return nil, schema.GroupVersionKind{}, UnknownResource, nil
		}
		return nil, schema.GroupVersionKind{}, NoSchema, nil
	}
	if s, ok := b.cache.Load(gvk); ok {
		return s.(*spec.Schema), gvk, Found, nil
	}
	t := b.scheme.AllKnownTypes()[gvk]
	s := schemaOf(t, map[reflect.Type]bool{})
	b.cache.Store(gvk, s)
	return s, gvk, Found, nil
}

var (
	typeTime       = reflect.TypeFor[metav1.Time]()
	typeMicroTime  = reflect.TypeFor[metav1.MicroTime]()
	typeDuration   = reflect.TypeFor[metav1.Duration]()
	typeQuantity   = reflect.TypeFor[resource.Quantity]()
	typeIntOrStr   = reflect.TypeFor[intstr.IntOrString]()
	typeRawExt     = reflect.TypeFor[runtime.RawExtension]()
	typeFieldsV1   = reflect.TypeFor[metav1.FieldsV1]()
	typeJSON       = reflect.TypeFor[apiextensionsv1.JSON]()
	typeJSONSchema = reflect.TypeFor[apiextensionsv1.JSONSchemaProps]()
)

// schemaOf builds the schema of a Go API type. inProgress breaks cycles: a type met again
// inside itself becomes an object of unknown fields.
func schemaOf(t reflect.Type, inProgress map[reflect.Type]bool) *spec.Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case typeTime, typeMicroTime, typeDuration:
		return typed("string")
	case typeQuantity, typeIntOrStr:
		s := &spec.Schema{}
		s.Extensions = spec.Extensions{"x-kubernetes-int-or-string": true}
		return s
	case typeRawExt, typeFieldsV1, typeJSON, typeJSONSchema:
		return unknownFields()
	}
	switch t.Kind() {
	case reflect.Bool:
		return typed("boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return typed("integer")
	case reflect.Float32, reflect.Float64:
		return typed("number")
	case reflect.String:
		return typed("string")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return typed("string") // []byte is base64 text
		}
		s := typed("array")
		s.Items = &spec.SchemaOrArray{Schema: schemaOf(t.Elem(), inProgress)}
		return s
	case reflect.Map:
		s := typed("object")
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: schemaOf(t.Elem(), inProgress)}
		return s
	case reflect.Struct:
		if inProgress[t] {
			return unknownFields()
		}
		inProgress[t] = true
		defer delete(inProgress, t)
		s := typed("object")
		s.Properties = map[string]spec.Schema{}
		addFields(s, t, inProgress)
		return s
	}
	return unknownFields()
}

// addFields adds the JSON fields of struct t to s, inlining embedded structs.
func addFields(s *spec.Schema, t reflect.Type, inProgress map[reflect.Type]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(s, ft, inProgress)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		s.Properties[name] = *schemaOf(f.Type, inProgress)
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if !omitEmpty || (f.Type.Kind() == reflect.Struct && !strings.Contains(","+opts+",", ",omitzero,")) {
			s.Required = append(s.Required, name)
		}
	}
}

func typed(t string) *spec.Schema {
	return &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{t}}}
}

// unknownFields is an object whose fields are not known: CEL sees it as dyn.
func unknownFields() *spec.Schema {
	s := typed("object")
	s.Extensions = spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}
	return s
}
