package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// printJSON prints h, the HealthResult with its decidedBy explanations, as one indented
// JSON document, with the characters that act on a terminal escaped (escapeUnsafeJSON).
func printJSON(out io.Writer, h *syncapi.HealthResult) error {
	if h.Entries == nil {
		h.Entries = []syncapi.HealthEntry{}
	}
	if h.Hooks == nil {
		h.Hooks = []syncapi.HealthHook{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(h); err != nil {
		return err
	}
	_, err := out.Write(escapeUnsafeJSON(b.Bytes()))
	return err
}

// decider formats d as "rule I of KIND/[NAMESPACE/]NAME (CAUSE)", sanitized.
func decider(d *health.Decider) string {
	set := d.Kind + "/" + namespacedName(d.Namespace, d.Name)
	return sanitize(fmt.Sprintf("rule %d of %s (%s)", d.Rule, set, d.Cause))
}

// printExplanations prints, after the table of release status --explain, which rule
// decided each entry that is not Healthy (the decidedBy of /health), and why some
// could not be explained (its decidedByError).
func printExplanations(out io.Writer, h *syncapi.HealthResult) {
	fmt.Fprintln(out)
	fmt.Fprintln(out, "DECIDED BY")
	if printDecidedBy(out, h.Entries) == 0 {
		fmt.Fprintln(out, "No entry that a rule decides is failing now.")
	}
	if h.DecidedByError != "" {
		fmt.Fprintf(out, "Not explained: %s\n", sanitize(h.DecidedByError))
	}
}

// printDeciders prints, under the entries that keep a Release from Healthy, the rule
// that decides each (printDecidedBy) and, when /health could not explain some of them,
// why (its decidedByError), so that a missing explanation is never silent.
func printDeciders(out io.Writer, entries []syncapi.HealthEntry, decidedByError string) {
	printDecidedBy(out, entries)
	if decidedByError != "" {
		fmt.Fprintf(out, "Not explained: %s\n", sanitize(decidedByError))
	}
}

// printDecidedBy prints one line "KIND NAMESPACE/NAME: rule I of SET (CAUSE)" per entry
// that has a decidedBy, and returns how many it printed.
func printDecidedBy(out io.Writer, entries []syncapi.HealthEntry) int {
	n := 0
	for _, e := range entries {
		if e.DecidedBy == nil {
			continue
		}
		fmt.Fprintf(out, "%s %s: %s\n", sanitize(e.Kind), sanitize(namespacedName(e.Namespace, e.Name)), decider(e.DecidedBy))
		n++
	}
	return n
}
