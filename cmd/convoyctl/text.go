package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text that comes from objects, rules or the health endpoint (messages that a rule's
// messageExpression computes, names, reasons) is printed only through sanitize (or cell,
// sanitizeLines, escapeUnsafeJSON): a rule author must not be able to move the cursor,
// clear the screen, set the terminal's title, reorder what follows or start a line that
// looks like convoyctl's own in a terminal or a CI log.

// unsafeRune reports whether r acts on a terminal instead of showing as a character:
// the C0 control characters (U+0000–U+001F, including tab, line feed, carriage return and
// ESC), DEL (U+007F), the C1 control characters (U+0080–U+009F, such as U+009B, the
// one-character CSI), the Unicode bidirectional formatting characters (U+061C,
// U+200E–U+200F, the embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069)
// and the line and paragraph separators U+2028 and U+2029.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// sanitize returns s on one line, with every unsafeRune replaced by a space (and every
// byte that is not UTF-8, such as a lone 0x9B, by U+FFFD).
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if unsafeRune(r) {
			return ' '
		}
		return r
	}, s)
}

// sanitizeLines is sanitize for a text of several lines, such as an error that quotes a
// CEL expression under its message: each line is sanitized, the line feeds between them
// stay.
func sanitizeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = sanitize(l)
	}
	return strings.Join(lines, "\n")
}

// cell makes s one table cell: - when empty, sanitized otherwise (a control character
// would also break the columns).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return sanitize(s)
}

// escapeUnsafeJSON returns the JSON text b with every unsafeRune that encoding/json
// leaves as is (DEL, the C1 and bidirectional formatting characters) written as a \uXXXX
// escape: the same value for a JSON reader, inert on a terminal. Such runes can only
// occur inside strings in JSON, where the escape is always valid.
func escapeUnsafeJSON(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 || !unsafeRune(r) || r < ' ' {
			// Invalid UTF-8 cannot come out of encoding/json (it writes U+FFFD), and C0
			// characters are already escaped.
			if out != nil {
				out = append(out, b[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		out = fmt.Appendf(out, `\u%04x`, r)
		i += n
	}
	if out == nil {
		return b
	}
	return out
}
