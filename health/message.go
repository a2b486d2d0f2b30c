package health

import (
	"fmt"
	"unicode/utf8"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// truncationMark ends a string that truncate cut.
const truncationMark = "…"

// evaluationErrorPrefix starts the message of an Error result (docs/design.md, "Messages").
const evaluationErrorPrefix = "evaluation error: "

// TruncateMessage cuts s to at most v1alpha1.MaxMessageLength (1024) characters, counted
// as runes, the unit of the CRD's maxLength. A cut message keeps its first 1023 runes and
// ends in "…", so it is exactly 1024 runes long. A string that fits is returned as is.
// (docs/design.md, "Objects and owners", ReleaseInventory entries[].message.)
func TruncateMessage(s string) string {
	return truncate(s, v1alpha1.MaxMessageLength)
}

// truncate cuts s to at most limit (> 0) runes: a cut string keeps its first limit-1
// runes and ends in "…". A string that fits is returned as is; a cut never splits a
// UTF-8 sequence.
func truncate(s string, limit int) string {
	// A string of at most limit bytes has at most limit runes: no need to count.
	if len(s) <= limit || utf8.RuneCountInString(s) <= limit {
		return s
	}
	n := 0
	for i := range s {
		if n == limit-1 {
			return s[:i] + truncationMark
		}
		n++
	}
	return s // unreachable: s has more than limit runes
}

// generalMessage is the message of a failing rule that has no usable messageExpression
// (docs/design.md, "Messages"). It names the set as <Kind>/<name>, without a namespace,
// exactly as users match it.
func generalMessage(kind, name string, index int) string {
	return fmt.Sprintf("health rule %d of %s/%s not satisfied", index, kind, name)
}
