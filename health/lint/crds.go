package lint

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// CRDs is the SchemaSource of CustomResourceDefinitions given as files (convoyctl health
// lint --schema): the schema of each served version, as the API server builds it for
// CEL (the structural schema), with metadata typed as ObjectMeta and apiVersion and kind
// as strings, as the cluster's /openapi/v3 publishes them.
//
// It knows the resources of the groups of its CRDs: a version that a CRD lacks or does
// not serve is not type-checked, and says so in a note (an older install may serve
// it); a resource of such a group that no CRD defines is UnknownResource. Other groups
// are NoSchema. Build it with NewCRDs; it is read-only afterwards.
type CRDs struct {
	schemas map[schema.GroupVersionResource]crdVersion // schema nil: no field declared
	// served lists the served versions of each group-resource, for the note.
	served map[schema.GroupResource][]string
	groups map[string]bool
}

type crdVersion struct {
	schema *spec.Schema
	gvk    schema.GroupVersionKind
}

// NewCRDs indexes the served versions of crds. Several CRDs of one group and resource
// add up (a version that the current release dropped can come from an older one), but a
// version defined twice is an error. A version whose schema declares no field (none, or
// only x-kubernetes-preserve-unknown-fields) is not type-checked, which a note says; a
// schema that is not structural, or a CRD without spec.group, spec.names.plural,
// spec.names.kind or a served version's name, is an error naming the CRD.
func NewCRDs(crds []apiextensionsv1.CustomResourceDefinition) (*CRDs, error) {
	c := &CRDs{schemas: map[schema.GroupVersionResource]crdVersion{}, served: map[schema.GroupResource][]string{}, groups: map[string]bool{}}
	meta := schemaOf(reflect.TypeFor[metav1.ObjectMeta](), map[reflect.Type]bool{})
	for i := range crds {
		crd := &crds[i]
		if crd.Spec.Group == "" || crd.Spec.Names.Plural == "" || crd.Spec.Names.Kind == "" {
			// The API server requires all three; without them the CRD would claim the core group.
			return nil, fmt.Errorf("CustomResourceDefinition %q: spec.group, spec.names.plural and spec.names.kind are required", crd.Name)
		}
		gr := schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
		if c.served[gr] == nil {
			c.served[gr] = []string{}
		}
		c.groups[gr.Group] = true
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if v.Name == "" {
				return nil, fmt.Errorf("CustomResourceDefinition %s: a served version without a name", crd.Name)
			}
			if _, dup := c.schemas[gr.WithVersion(v.Name)]; dup {
				return nil, fmt.Errorf("CustomResourceDefinition %s: version %s of %s is defined twice", crd.Name, v.Name, gr)
			}
			s, err := versionSchema(&v)
			if err != nil {
				return nil, fmt.Errorf("CustomResourceDefinition %s version %s: %w", crd.Name, v.Name, err)
			}
			if len(s.Properties) == 0 {
				s = nil // no fields declared: nothing to type-check against
			} else {
				s.Properties["metadata"] = *meta
				s.Properties["apiVersion"] = *typed("string")
				s.Properties["kind"] = *typed("string")
				if !slices.Contains(s.Required, "metadata") {
					s.Required = append(s.Required, "metadata")
				}
			}
			gvk := schema.GroupVersionKind{Group: gr.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			c.schemas[gr.WithVersion(v.Name)] = crdVersion{schema: s, gvk: gvk}
			c.served[gr] = append(c.served[gr], v.Name)
		}
	}
	return c, nil
}

// versionSchema is the structural schema of one version (spec.versions[].schema), an
// empty object when it has none.
func versionSchema(v *apiextensionsv1.CustomResourceDefinitionVersion) (*spec.Schema, error) {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return typed("object"), nil
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema: %w", err)
	}
	ss, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("the schema is not structural: %w", err)
	}
	if errs := structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), ss); len(errs) > 0 {
		return nil, fmt.Errorf("the schema is not structural: %w", errs.ToAggregate())
	}
	return ss.ToKubeOpenAPI(), nil
}

// Lookup returns the schema of gv/resource when a CRD serves it.
func (c *CRDs) Lookup(gv schema.GroupVersion, resource string) (*spec.Schema, schema.GroupVersionKind, Resolution, error) {
	if v, ok := c.schemas[gv.WithResource(resource)]; ok {
		if v.schema == nil {
			return nil, v.gvk, NoSchema, fmt.Errorf("the CustomResourceDefinition given declares no fields for %s", gv.Version)
		}
		return v.schema, v.gvk, Found, nil
	}
	if !c.groups[gv.Group] {
		return nil, schema.GroupVersionKind{}, NoSchema, nil
	}
	served, ok := c.served[schema.GroupResource{Group: gv.Group, Resource: resource}]
	if !ok {
		return nil, schema.GroupVersionKind{}, UnknownResource, nil
	}
	return nil, schema.GroupVersionKind{}, NoSchema, fmt.Errorf("the CustomResourceDefinition given serves %s, not %s", strings.Join(served, ", "), gv.Version)
}

// Sources asks each source in turn and returns the first answer that is not NoSchema
// without an error; when none has one, the first error, else NoSchema.
type Sources []SchemaSource

// Lookup implements SchemaSource.
func (ss Sources) Lookup(gv schema.GroupVersion, resource string) (*spec.Schema, schema.GroupVersionKind, Resolution, error) {
	var firstErr error
	for _, s := range ss {
		sch, gvk, res, err := s.Lookup(gv, resource)
		if err == nil && res != NoSchema {
			return sch, gvk, res, nil
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return nil, schema.GroupVersionKind{}, NoSchema, firstErr
}
