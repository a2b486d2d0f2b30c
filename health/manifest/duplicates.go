package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// DuplicateKeyError is the error of a mapping that has the same key twice: YAML and
// JSON decoders keep the last value silently, so `ruleExpression:` written twice would
// replace the rule without a word.
type DuplicateKeyError struct {
	// Document is the 1-based number of the document in the file.
	Document int
	// Path is the path of the duplicated key, for example spec.rules[0].ruleExpression.
	Path string
	// Key is the duplicated key.
	Key string
	// Line and FirstLine are the 1-based lines of the second and the first occurrence.
	Line, FirstLine int
}

// Error names the document, the path, the key and both lines.
func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("document %d: duplicate key %q at %s (line %d; first at line %d)",
		e.Document, e.Key, e.Path, e.Line, e.FirstLine)
}

// checkDuplicateKeys parses data (YAML or JSON, one or more documents) with yaml.v3,
// whose nodes keep every key and its line, and returns a *DuplicateKeyError for the
// first mapping that repeats a key. parsed is false when yaml.v3 cannot parse data (a
// stream of JSON documents without separators, or a syntax error that the converting
// decoder reports): documents then checks each document on its own.
func checkDuplicateKeys(data []byte) (parsed bool, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for n := 1; ; n++ {
		var doc yaml.Node
		if derr := dec.Decode(&doc); derr != nil {
			return errors.Is(derr, io.EOF), nil
		}
		if err := duplicateKeys(&doc, "", 0); err != nil {
			err.Document = n
			return true, err
		}
	}
}

// maxDepth bounds the recursion over nested nodes.
const maxDepth = 10000

// duplicateKeys walks a node; path is its path so far.
func duplicateKeys(n *yaml.Node, path string, depth int) *DuplicateKeyError {
	if n == nil || depth > maxDepth {
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := duplicateKeys(c, path, depth+1); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := duplicateKeys(c, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				continue // complex keys and merge keys (<<) are left to the decoder
			}
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if first, ok := seen[k.Value]; ok {
				return &DuplicateKeyError{Path: p, Key: k.Value, Line: k.Line, FirstLine: first}
			}
			seen[k.Value] = k.Line
			if err := duplicateKeys(v, p, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
