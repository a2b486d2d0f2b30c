// Package manifest reads the files that convoyctl health eval (docs/design.md, "Command line") takes:
// objects and health rule sets written as YAML or JSON, one or more documents per file,
// or a List of them.
//
// Objects decode the way the dynamic client returns live objects: whole numbers become
// int64, other numbers float64. Decoding YAML or JSON into map[string]any with
// sigs.k8s.io/yaml or encoding/json would give float64 for every number, and CEL does
// not treat double and int alike (`object.spec.replicas + 1` has no overload for a
// double and an int); see testdata/objects/18a-cel-int-vs-double.yaml. This package goes through
// apimachinery's unstructured JSON scheme, as the API machinery does.
//
//	objs, err := manifest.DecodeObjects(f) // []unstructured.Unstructured
//	global, local, err := manifest.DecodeRuleSets(g)
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// Kinds of the two rule set types.
const (
	kindGlobal = "GlobalHealthRuleSet"
	kindLocal  = "HealthRuleSet"
)

// scanBuffer is how far the decoder looks ahead to tell JSON from YAML.
const scanBuffer = 4096

// documents splits r into its documents, each converted to JSON, the way
// apimachinery's YAMLOrJSONDecoder does (a stream whose first character is "{" is JSON
// documents; anything else YAML documents separated by "---", each converted by
// sigs.k8s.io/yaml). Empty documents (a leading "---", a document of comments only) are
// skipped. An error names the 1-based number of the document that failed. A key written
// twice in one mapping is a *DuplicateKeyError, found by the decoder that produces the
// values (duplicates.go): converting YAML to JSON would otherwise keep the last value
// silently.
func documents(r io.Reader) ([][]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if utilyaml.IsJSONBuffer(data) {
		return jsonDocuments(data)
	}
	return yamlDocuments(data)
}

// jsonDocuments splits a stream of JSON documents.
func jsonDocuments(data []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs [][]byte
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		end := int(dec.InputOffset())
		if d := jsonDuplicate(raw, bytes.Count(data[:max(end-len(raw), 0)], []byte("\n"))); d != nil {
			d.Document = n
			return nil, d
		}
		if s := strings.TrimSpace(string(raw)); s == "null" {
			continue
		}
		docs = append(docs, raw)
	}
}

// yamlDocuments splits a stream of YAML documents and converts each to JSON.
func yamlDocuments(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReaderSize(bytes.NewReader(data), scanBuffer))
	var docs [][]byte
	cursor := 0 // where the previous document ended in data
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		start := cursor
		if i := bytes.Index(data[cursor:], doc); i >= 0 {
			start = cursor + i
			cursor = start + len(doc)
		}
		if d := yamlDuplicate(doc, bytes.Count(data[:start], []byte("\n"))); d != nil {
			d.Document = n
			return nil, d
		}
		raw, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
			continue
		}
		docs = append(docs, raw)
	}
}

// listMetaFields are the fields of a list's metadata (ListMeta). An object's metadata
// (ObjectMeta) has a name, which a list's never has.
var listMetaFields = map[string]bool{"resourceVersion": true, "selfLink": true, "continue": true, "remainingItemCount": true}

// errListItems is the error of a document of kind List without an array of items.
var errListItems = errors.New("List: items must be an array of objects")

// isList reports whether the document m (one JSON object) is a list, shaped like one:
//
//   - kind List (the generic list of kubectl): always a list, whose items must be an
//     array (else errListItems);
//   - kind <X>List: a list when items is an array (or null), there is no field but
//     apiVersion, kind, metadata and items, and metadata has only a list's fields
//     (resourceVersion, selfLink, continue, remainingItemCount), so no name.
//
// Anything else is an object, even when its kind ends in List and it has items of its
// own: a custom resource such as an IPAllowList with metadata.name, items and a status
// is one object, not a list of IPAllows.
func isList(m map[string]any) (bool, error) {
	kind, _ := m["kind"].(string)
	items, hasItems := m["items"]
	_, array := items.([]any)
	array = array || (hasItems && items == nil)
	switch {
	case kind == "List":
		if !array {
			return false, errListItems
		}
		return true, nil
	case !strings.HasSuffix(kind, "List") || !array:
		return false, nil
	}
	for k := range m {
		switch k {
		case "apiVersion", "kind", "metadata", "items":
		default:
			return false, nil
		}
	}
	if md, ok := m["metadata"]; ok && md != nil {
		fields, ok := md.(map[string]any)
		if !ok {
			return false, nil
		}
		for k := range fields {
			if !listMetaFields[k] {
				return false, nil
			}
		}
	}
	return true, nil
}

// listItems returns the items of doc, a document that isList.
func listItems(doc []byte) ([]json.RawMessage, error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		return nil, fmt.Errorf("items: %w", shorten(err))
	}
	return list.Items, nil
}

// DecodeObjects reads every object in r. r holds YAML or JSON, one or more documents; a
// document shaped like a list (isList: kind List, or kind <X>List with items and nothing
// of an object, such as a name) stands for its items (an item without apiVersion and
// kind gets them from the list, as for a PodList). Every
// object must have a kind and an apiVersion. Numbers decode as on live objects: int64 for
// whole numbers, float64 otherwise. An error names the document (1-based) and, within a
// list, the item (0-based).
func DecodeObjects(r io.Reader) ([]unstructured.Unstructured, error) {
	docs, err := documents(r)
	if err != nil {
		return nil, err
	}
	var objs []unstructured.Unstructured
	for i, doc := range docs {
		got, err := decodeDocument(doc, "", "", 0)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

// maxListDepth bounds Lists nested in Lists, in every decoder: each level holds a copy
// of its items while the next one decodes.
const maxListDepth = 8

// decodeDocument decodes one JSON object: a list (isList; its items may be lists again)
// gives its items, anything else itself. Items without apiVersion and kind inherit them from
// the list (apiVersion, and kind minus "List"), as for a PodList.
func decodeDocument(doc []byte, listAPIVersion, listKind string, depth int) ([]unstructured.Unstructured, error) {
	var u unstructured.Unstructured
	if _, _, err := unstructured.UnstructuredJSONScheme.Decode(doc, nil, &u); err != nil {
		// An item may lack apiVersion and kind; fill them in from its list.
		if listKind == "" {
			return nil, shorten(err)
		}
		m := map[string]any{}
		if jerr := sigsjson.UnmarshalCaseSensitivePreserveInts(doc, &m); jerr != nil {
			return nil, fmt.Errorf("not an object: %w", shorten(jerr))
		}
		if m["apiVersion"] == nil {
			m["apiVersion"] = listAPIVersion
		}
		if m["kind"] == nil && listKind != "List" {
			m["kind"] = strings.TrimSuffix(listKind, "List")
		}
		u.Object = m
	}
	list, err := isList(u.Object)
	if err != nil {
		return nil, err
	}
	if !list {
		u.Object = wholeNumbersAsInt(u.Object).(map[string]any)
		if err := checkObject(&u); err != nil {
			return nil, err
		}
		return []unstructured.Unstructured{u}, nil
	}
	var out []unstructured.Unstructured
	err = eachItem(doc, u.GetKind(), depth, func(item []byte) error {
		got, err := decodeDocument(item, u.GetAPIVersion(), u.GetKind(), depth+1)
		out = append(out, got...)
		return err
	})
	return out, err
}

// eachItem calls fn with each item of doc, a document of kind kind that isList inside
// depth Lists, in order, and stops at the first error, which it returns naming the item
// (0-based); doc deeper than maxListDepth, or without an array of items, is an error.
func eachItem(doc []byte, kind string, depth int, fn func(item []byte) error) error {
	if depth >= maxListDepth {
		return fmt.Errorf("Lists nested deeper than %d", maxListDepth)
	}
	items, err := listItems(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	for j, item := range items {
		if err := fn(item); err != nil {
			return fmt.Errorf("item %d: %w", j, err)
		}
	}
	return nil
}

// wholeNumbersAsInt turns every float64 that holds a whole number in the int64 range
// into an int64, as the API server does when it stores an object: JSON `3.0` or `1e3`
// reads back as 3 and 1000 from a live object, while 2.5 stays a double.
func wholeNumbersAsInt(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = wholeNumbersAsInt(e)
		}
	case []any:
		for i, e := range t {
			t[i] = wholeNumbersAsInt(e)
		}
	case float64:
		if t == math.Trunc(t) && t >= math.MinInt64 && t < math.MaxInt64 {
			return int64(t)
		}
	}
	return v
}

// checkObject requires what matching a rule needs: apiVersion and kind.
func checkObject(u *unstructured.Unstructured) error {
	if u.GetKind() == "" {
		return errors.New("object has no kind")
	}
	if u.GetAPIVersion() == "" {
		return fmt.Errorf("%s %q has no apiVersion", u.GetKind(), u.GetName())
	}
	return nil
}

// shorten replaces apimachinery's missing-kind error, which quotes the whole document,
// with a short one.
func shorten(err error) error {
	if runtime.IsMissingKind(err) {
		return errors.New("object has no kind")
	}
	return err
}
