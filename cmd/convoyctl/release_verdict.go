package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// Reasons that release wait derives from a HealthResult. They are the reasons of the
// Release's Healthy condition (docs/design.md, "Healthy condition") that /health can tell.
const (
	reasonHealthy     = v1alpha1.ReasonHealthy
	reasonProgressing = v1alpha1.ReasonProgressing
	reasonDegraded    = v1alpha1.ReasonDegraded
	reasonUnknown     = v1alpha1.ReasonUnknown
	reasonPending     = v1alpha1.ReasonPending
)

// waitReasons are the reasons --for condition=REASON accepts, in the table's order.
var waitReasons = []string{reasonPending, reasonDegraded, reasonUnknown, reasonProgressing, reasonHealthy}

// verdict is the state of a whole Release as one HealthResult shows it.
type verdict struct {
	// reason is one of waitReasons.
	reason string
	// detail says why in one line, for example "3/5 healthy; Deployment demo/web: 1/3 available",
	// sanitized: printable as is.
	detail string
	// notHealthy are the entries that keep the Release from Healthy, in the result's
	// order (wave first): the Degraded ones for Degraded, else every entry that is not
	// Healthy at its current render.
	notHealthy []syncapi.HealthEntry
}

// judge derives the Release's state from h as the health loop derives the Healthy
// condition (docs/design.md, "Healthy condition"), with one stricter rule: an entry counts for its current
// render only once the observer assessed it at that render (assessedRenderRef ==
// renderRef). Until then, like an entry whose renderRef is not status.lastAttempted
// (renderCurrent false), it is Pending: its state may belong to the previous render, so a
// Healthy or Degraded of the old render never ends a wait for the new one.
func judge(h *syncapi.HealthResult) verdict {
	var degraded, unknown, progressing, pending []syncapi.HealthEntry
	healthy := 0
	for _, e := range h.Entries {
		switch {
		case e.State == "" || e.AssessedRenderRef != e.RenderRef:
			pending = append(pending, e)
		case e.State == v1alpha1.StateHealthy:
			healthy++
		case e.State == v1alpha1.StateDegraded:
			degraded = append(degraded, e)
		case e.State == v1alpha1.StateUnknown:
			unknown = append(unknown, e)
		default:
			progressing = append(progressing, e)
		}
	}
	count := fmt.Sprintf("%d/%d healthy", healthy, len(h.Entries))
	first := func(list []syncapi.HealthEntry) string {
		e := list[0]
		s := fmt.Sprintf("%s; %s %s", count, e.Kind, namespacedName(e.Namespace, e.Name))
		if e.Message != "" {
			s += ": " + e.Message
		}
		return sanitize(s)
	}
	notHealthy := func() []syncapi.HealthEntry {
		var out []syncapi.HealthEntry
		for _, e := range h.Entries {
			if e.State != v1alpha1.StateHealthy || e.AssessedRenderRef != e.RenderRef {
				out = append(out, e)
			}
		}
		return out
	}
	switch {
	case !h.RenderCurrent:
		return verdict{reason: reasonPending, detail: count + "; entries of another render than status.lastAttempted", notHealthy: notHealthy()}
	case len(pending) > 0:
		return verdict{reason: reasonPending, detail: fmt.Sprintf("%s; %d entries not assessed at their render yet", count, len(pending)), notHealthy: notHealthy()}
	case len(degraded) > 0:
		return verdict{reason: reasonDegraded, detail: first(degraded), notHealthy: degraded}
	case len(unknown) > 0:
		return verdict{reason: reasonUnknown, detail: first(unknown), notHealthy: notHealthy()}
	case len(progressing) > 0:
		return verdict{reason: reasonProgressing, detail: first(progressing), notHealthy: notHealthy()}
	}
	return verdict{reason: reasonHealthy, detail: count}
}

// namespacedName is namespace/name, or name for a cluster-scoped object.
func namespacedName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// printEntries prints the table of entries of release status: RENDER is the render that
// applied the object, with the render the state was assessed at when that differs;
// STATE ends in " (no rule)" for an entry that no selected rule judges (rulesApplied 0),
// so that a Healthy that only means "nothing failed" reads as such; empty fields show
// as -. Under the table, DIAGNOSIS has one line "KIND NAMESPACE/NAME: DIAGNOSIS" per
// entry that has a diagnosis (why a failing workload fails, from its Pods).
func printEntries(out io.Writer, entries []syncapi.HealthEntry) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tKIND\tNAMESPACE\tNAME\tSTATE\tRENDER\tMESSAGE")
	for _, e := range entries {
		kind := e.Kind
		if e.Group != "" {
			kind += "." + e.Group
		}
		render := e.RenderRef
		if e.AssessedRenderRef != "" && e.AssessedRenderRef != e.RenderRef {
			render += " (assessed " + e.AssessedRenderRef + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Wave, cell(kind), cell(e.Namespace), cell(e.Name),
			stateCell(&e), cell(render), cell(e.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	header := false
	for _, e := range entries {
		if e.Diagnosis == "" {
			continue
		}
		if !header {
			fmt.Fprintln(out)
			fmt.Fprintln(out, "DIAGNOSIS")
			header = true
		}
		fmt.Fprintf(out, "%s %s: %s\n", sanitize(e.Kind), sanitize(namespacedName(e.Namespace, e.Name)), sanitize(e.Diagnosis))
	}
	return nil
}

// noRuleMark follows the state of an entry that no selected rule judges.
const noRuleMark = " (no rule)"

// stateCell is the STATE cell of an entry: its state, marked with noRuleMark when
// rulesApplied is 0 (not when the server did not count the rules: null); - before the
// first assessment.
func stateCell(e *syncapi.HealthEntry) string {
	if e.State == "" {
		return "-"
	}
	s := cell(string(e.State))
	if unjudged(e) {
		s += noRuleMark
	}
	return s
}

// unjudged reports whether no selected rule judges e (rulesApplied 0).
func unjudged(e *syncapi.HealthEntry) bool { return e.RulesApplied != nil && *e.RulesApplied == 0 }
