package manifest

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"

	yaml3 "go.yaml.in/yaml/v3"
	sigsjson "sigs.k8s.io/json"
	yaml2 "sigs.k8s.io/yaml/goyaml.v2"
)

// DuplicateKeyError is the error of a mapping that has the same key twice: YAML and
// JSON decoders keep the last value silently, so `ruleExpression:` written twice would
// replace the rule without a word.
type DuplicateKeyError struct {
	// Document is the 1-based number of the document in the file.
	Document int
	// Path is the path of the duplicated key, for example spec.rules[0].ruleExpression.
	Path string
	// Key is the duplicated key, as the decoded object names it (YAML's `on` is "true").
	Key string
	// Line and FirstLine are the 1-based lines of the second and the first occurrence;
	// 0 when they cannot be told.
	Line, FirstLine int
}

// Error names the document, the path, the key and both lines when known.
func (e *DuplicateKeyError) Error() string {
	if e.Line == 0 || e.FirstLine == 0 {
		return fmt.Sprintf("document %d: duplicate key %q at %s", e.Document, e.Key, e.Path)
	}
	return fmt.Sprintf("document %d: duplicate key %q at %s (line %d; first at line %d)",
		e.Document, e.Key, e.Path, e.Line, e.FirstLine)
}

// Duplicates are found by the decoders that produce the values, so that the check and
// the meaning never disagree: a JSON document by sigs.k8s.io/json's strict mode (the
// API server's), which compares keys after their escapes are decoded; a YAML document
// by go-yaml v2, the parser of sigs.k8s.io/yaml (kubectl's and the API server's), with
// its YAML 1.1 keys: `on` and `off` are the booleans true and false, so `on` and "true"
// are the same key "true" once converted to JSON, while "on" and `on` are two keys.
// go.yaml.in/yaml/v3 is used only to find the lines of a duplicate for the message.

// jsonDuplicate returns the first duplicated key of a JSON document, or nil.
func jsonDuplicate(doc []byte, lineOffset int) *DuplicateKeyError {
	var v any
	strict, err := sigsjson.UnmarshalStrict(doc, &v, sigsjson.DisallowDuplicateFields)
	if err != nil || len(strict) == 0 {
		return nil //nolint:nilerr // a syntax error is the value decoder's to report
	}
	m := duplicateFieldRE.FindStringSubmatch(strict[0].Error())
	if m == nil {
		return &DuplicateKeyError{Path: strict[0].Error()}
	}
	d := &DuplicateKeyError{Path: m[1], Key: lastSegment(m[1])}
	locate(doc, d)
	d.shift(lineOffset)
	return d
}

// duplicateFieldRE reads sigs.k8s.io/json's strict error: duplicate field "a.b[0].c".
var duplicateFieldRE = regexp.MustCompile(`^duplicate field "(.*)"$`)

// alreadySetRE reads go-yaml v2's strict error: line 6: key "phase" already set in map
// (a key that is not a string is not quoted: key true already set in map).
var alreadySetRE = regexp.MustCompile(`line (\d+): key ("(?:[^"\\]|\\.)*"|\S+) already set in map`)

// yamlDuplicate returns the first duplicated key of a YAML document, or nil.
func yamlDuplicate(doc []byte, lineOffset int) *DuplicateKeyError {
	var v any
	if err := yaml2.UnmarshalStrict(doc, &v); err != nil {
		m := alreadySetRE.FindStringSubmatch(err.Error())
		if m == nil {
			return nil // a syntax error is the value decoder's to report
		}
		key := m[2]
		if uq, uerr := strconv.Unquote(key); uerr == nil {
			key = uq
		}
		line, _ := strconv.Atoi(m[1])
		d := &DuplicateKeyError{Key: key, Line: line}
		locate(doc, d)
		if d.Path == "" {
			d.Path = key
		}
		d.shift(lineOffset)
		return d
	}
	if d := collision(v, "", 0); d != nil {
		locate(doc, d)
		d.shift(lineOffset)
		return d
	}
	return nil
}

// shift makes the lines of d, counted in its document, lines of the file.
func (d *DuplicateKeyError) shift(lineOffset int) {
	if d.Line != 0 {
		d.Line += lineOffset
	}
	if d.FirstLine != 0 {
		d.FirstLine += lineOffset
	}
}

// maxDepth bounds the recursion over nested values.
const maxDepth = 10000

// collision finds two keys of one mapping that differ in YAML (true and "true") but
// become the same JSON key.
func collision(v any, path string, depth int) *DuplicateKeyError {
	if depth > maxDepth {
		return nil
	}
	switch t := v.(type) {
	case map[any]any:
		keys := make([]string, 0, len(t))
		byKey := map[string]any{}
		seen := map[string]bool{}
		var dup *DuplicateKeyError
		for k, e := range t {
			ks := jsonKey(k)
			if seen[ks] && (dup == nil || ks < dup.Key) {
				dup = &DuplicateKeyError{Path: join(path, ks), Key: ks}
			}
			seen[ks] = true
			keys = append(keys, ks)
			byKey[ks] = e
		}
		if dup != nil {
			return dup
		}
		sort.Strings(keys)
		for _, k := range keys {
			if d := collision(byKey[k], join(path, k), depth+1); d != nil {
				return d
			}
		}
	case []any:
		for i, e := range t {
			if d := collision(e, path+"["+strconv.Itoa(i)+"]", depth+1); d != nil {
				return d
			}
		}
	}
	return nil
}

// jsonKey is the JSON key sigs.k8s.io/yaml makes of a go-yaml v2 key.
func jsonKey(k any) string {
	switch t := k.(type) {
	case string:
		return t
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		switch s := strconv.FormatFloat(t, 'g', -1, 32); s {
		case "+Inf":
			return ".inf"
		case "-Inf":
			return "-.inf"
		case "NaN":
			return ".nan"
		default:
			return s
		}
	case bool:
		return strconv.FormatBool(t)
	}
	return fmt.Sprint(k)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// lastSegment is the key at the end of a path (a.b[0].c -> c).
func lastSegment(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' {
			return path[i+1:]
		}
	}
	return path
}

// locate fills in the lines of d (and its path when only the key and a line are known)
// from go.yaml.in/yaml/v3's nodes, resolving each key as go-yaml v2 does. go-yaml v2's
// strict error gives the line where the repeated key's value starts, so the repeated key
// closest above that line is taken. It leaves d as it is when v3 cannot parse doc or
// finds no such duplicate.
func locate(doc []byte, d *DuplicateKeyError) {
	var root yaml3.Node
	if err := yaml3.Unmarshal(doc, &root); err != nil {
		return
	}
	found := false
	var best DuplicateKeyError
	var walk func(n *yaml3.Node, path string, depth int)
	walk = func(n *yaml3.Node, path string, depth int) {
		if n == nil || depth > maxDepth {
			return
		}
		switch n.Kind {
		case yaml3.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, depth+1)
			}
		case yaml3.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]", depth+1)
			}
		case yaml3.MappingNode:
			first := map[string]int{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				ks := resolveKey(k)
				p := join(path, ks)
				if line, ok := first[ks]; ok && ks == d.Key && (d.Path == "" || d.Path == p) &&
					(d.Line == 0 || k.Line <= d.Line) && (!found || k.Line > best.Line) {
					found, best = true, DuplicateKeyError{Path: p, Line: k.Line, FirstLine: line}
				}
				if _, ok := first[ks]; !ok {
					first[ks] = k.Line
				}
				walk(n.Content[i+1], p, depth+1)
			}
		}
	}
	walk(&root, "", 0)
	if found {
		d.Path, d.Line, d.FirstLine = best.Path, best.Line, best.FirstLine
	}
}

// resolveKey is the JSON key go-yaml v2 and sigs.k8s.io/yaml make of a key node.
func resolveKey(n *yaml3.Node) string {
	if n.Kind != yaml3.ScalarNode {
		return ""
	}
	if n.Style&(yaml3.DoubleQuotedStyle|yaml3.SingleQuotedStyle|yaml3.LiteralStyle|yaml3.FoldedStyle) != 0 ||
		(n.Style&yaml3.TaggedStyle != 0 && n.Tag == "!!str") {
		return n.Value
	}
	var v any
	if err := yaml2.Unmarshal([]byte(n.Value), &v); err != nil || v == nil {
		return n.Value
	}
	return jsonKey(v)
}
