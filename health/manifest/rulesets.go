package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsjson "sigs.k8s.io/json"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
)

// typeMeta is what DecodeRuleSets and DecodeCRDs read first of every document: its
// apiVersion and kind, and whether it is a list (isList).
type typeMeta struct {
	APIVersion, Kind string
	list             bool
}

// readTypeMeta reads the typeMeta of doc, one JSON object; an item that has neither
// apiVersion nor kind takes defaultAPIVersion and defaultKind (those of its typed list).
func readTypeMeta(doc []byte, defaultAPIVersion, defaultKind string) (typeMeta, error) {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return typeMeta{}, err
	}
	if m == nil {
		return typeMeta{}, errors.New("not an object")
	}
	var tm typeMeta
	tm.APIVersion, _ = m["apiVersion"].(string)
	tm.Kind, _ = m["kind"].(string)
	if tm.APIVersion == "" && tm.Kind == "" {
		tm.APIVersion, tm.Kind = defaultAPIVersion, defaultKind
		m["apiVersion"], m["kind"] = tm.APIVersion, tm.Kind
	}
	list, err := isList(m)
	tm.list = list
	return tm, err
}

// DecodeRuleSets reads every GlobalHealthRuleSet and HealthRuleSet in r, in file order.
// r holds YAML or JSON, one or more documents; a list (kind List, GlobalHealthRuleSetList
// or HealthRuleSetList, shaped like a list as DecodeObjects reads one) stands for its items. Every document must be one of the two kinds
// of extensions.convoy.kumodo.io/v1alpha1; any other kind is an error. Decoding is
// strict, as the API server's field validation: an unknown or duplicated field, or a
// field name in the wrong case, is an error that names the field. It does not validate
// the rules (that is NewEvaluator's job).
func DecodeRuleSets(r io.Reader) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet, error) {
	docs, err := documents(r)
	if err != nil {
		return nil, nil, err
	}
	var d ruleSetDecoder
	for i, doc := range docs {
		if err := d.decode(doc, "", "", 0); err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", i+1, err)
		}
	}
	return d.global, d.local, nil
}

// ruleSetDecoder collects the rule sets of DecodeRuleSets.
type ruleSetDecoder struct {
	global []extv1alpha1.GlobalHealthRuleSet
	local  []extv1alpha1.HealthRuleSet
}

// decode decodes one document or list item. defaultAPIVersion and defaultKind come from
// an enclosing typed list, for items that leave them out; depth counts the Lists around
// doc (at most maxListDepth).
func (d *ruleSetDecoder) decode(doc []byte, defaultAPIVersion, defaultKind string, depth int) error {
	tm, err := readTypeMeta(doc, defaultAPIVersion, defaultKind)
	if err != nil {
		return err
	}
	want := extv1alpha1.GroupVersion.String()
	switch {
	case tm.list:
		itemKind := ""
		if tm.Kind != "List" {
			itemKind = strings.TrimSuffix(tm.Kind, "List")
		}
		return eachItem(doc, tm.Kind, depth, func(item []byte) error {
			return d.decode(item, tm.APIVersion, itemKind, depth+1)
		})
	case tm.APIVersion == want && tm.Kind == kindGlobal:
		var set extv1alpha1.GlobalHealthRuleSet
		if err := strictUnmarshal(doc, &set); err != nil {
			return fmt.Errorf("%s %q: %w", kindGlobal, nameOf(doc), err)
		}
		set.APIVersion, set.Kind = want, kindGlobal
		d.global = append(d.global, set)
		return nil
	case tm.APIVersion == want && tm.Kind == kindLocal:
		var set extv1alpha1.HealthRuleSet
		if err := strictUnmarshal(doc, &set); err != nil {
			return fmt.Errorf("%s %q: %w", kindLocal, nameOf(doc), err)
		}
		set.APIVersion, set.Kind = want, kindLocal
		d.local = append(d.local, set)
		return nil
	default:
		return fmt.Errorf("unknown kind %q of apiVersion %q: want %s or %s of %s",
			tm.Kind, tm.APIVersion, kindGlobal, kindLocal, want)
	}
}

// strictUnmarshal decodes JSON case-sensitively and rejects unknown and duplicate fields.
func strictUnmarshal(doc []byte, into any) error {
	strict, err := sigsjson.UnmarshalStrict(doc, into)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// nameOf returns metadata.name of a document, or "" when it has none, for messages.
func nameOf(doc []byte) string {
	var m struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(doc, &m)
	return m.Metadata.Name
}

// DecodeCRDs reads every CustomResourceDefinition (apiextensions.k8s.io/v1) in r, in file
// order: YAML or JSON, one or more documents, a List standing for its items. Any other
// kind is an error naming the document; decoding is strict like DecodeRuleSets'. It is
// what convoyctl health lint --schema reads.
func DecodeCRDs(r io.Reader) ([]apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := documents(r)
	if err != nil {
		return nil, err
	}
	var out []apiextensionsv1.CustomResourceDefinition
	var decode func(doc []byte, depth int) error
	decode = func(doc []byte, depth int) error {
		tm, err := readTypeMeta(doc, "", "")
		if err != nil {
			return err
		}
		want := apiextensionsv1.SchemeGroupVersion.String()
		switch {
		case tm.list:
			return eachItem(doc, tm.Kind, depth, func(item []byte) error { return decode(item, depth+1) })
		case tm.APIVersion == want && tm.Kind == "CustomResourceDefinition":
			var crd apiextensionsv1.CustomResourceDefinition
			if err := strictUnmarshal(doc, &crd); err != nil {
				return fmt.Errorf("CustomResourceDefinition %q: %w", nameOf(doc), err)
			}
			out = append(out, crd)
			return nil
		default:
			return fmt.Errorf("%s %q of apiVersion %q is not a CustomResourceDefinition of %s", tm.Kind, nameOf(doc), tm.APIVersion, want)
		}
	}
	for i, doc := range docs {
		if err := decode(doc, 0); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
	}
	return out, nil
}
