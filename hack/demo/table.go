package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// maxEvents is how many of the latest events the redrawn screen keeps.
const maxEvents = 12

// display prints the demo's progress: events (what the driver did, sync requests) and
// the table of the Release's entries and hooks whenever it changes. In append mode
// (--once, or stdout not a terminal) it only appends lines, readable in a CI log; in
// redraw mode it repaints the terminal with the table and the latest events.
type display struct {
	out    io.Writer
	redraw bool
	start  time.Time

	mu        sync.Mutex
	events    []string
	lastTable string
}

// newDisplay returns a display writing to out.
func newDisplay(out io.Writer, redraw bool) *display {
	return &display{out: out, redraw: redraw, start: time.Now()}
}

// elapsed formats the time since the demo started, e.g. "+12.3s".
func (d *display) elapsed() string {
	return fmt.Sprintf("+%5.1fs", time.Since(d.start).Seconds())
}

// Event prints one line about what happened.
func (d *display) Event(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	line := fmt.Sprintf("[%s] %s", d.elapsed(), fmt.Sprintf(format, args...))
	if !d.redraw {
		fmt.Fprintln(d.out, line)
		return
	}
	d.events = append(d.events, line)
	if len(d.events) > maxEvents {
		d.events = d.events[len(d.events)-maxEvents:]
	}
	d.paint()
}

// Snapshot shows snap when its table differs from the last one shown.
func (d *display) Snapshot(snap *snapshot) {
	table := formatSnapshot(snap)
	d.mu.Lock()
	defer d.mu.Unlock()
	if table == d.lastTable {
		return
	}
	d.lastTable = table
	if d.redraw {
		d.paint()
		return
	}
	fmt.Fprintf(d.out, "---- [%s] %s\n%s\n", d.elapsed(), snap.At.Format("15:04:05"), table)
}

// paint repaints the terminal: the table, then the latest events. The caller holds mu.
func (d *display) paint() {
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J") // cursor home, clear the screen
	fmt.Fprintf(&b, "convoy-observer demo  [%s]  (Ctrl-C stops everything)\n\n", d.elapsed())
	if d.lastTable != "" {
		b.WriteString(d.lastTable)
		b.WriteString("\n")
	}
	b.WriteString("EVENTS\n")
	for _, e := range d.events {
		b.WriteString(e + "\n")
	}
	_, _ = io.WriteString(d.out, b.String())
}

// formatSnapshot renders snap as a header, the entries and the hooks.
func formatSnapshot(snap *snapshot) string {
	var b strings.Builder
	rel, h := snap.Release, snap.Health
	fmt.Fprintf(&b, "Release %s  lastAttempted=%s  renderCurrent=%t  sync requests=%d\n",
		h.Release, stateOr(rel.GetLastAttemptedRenderRef(), "-"), h.RenderCurrent, snap.Syncs)
	if c := snap.condition(); c != nil {
		fmt.Fprintf(&b, "Healthy=%s (%s): %s\n", c.Status, c.Reason, c.Message)
	} else {
		b.WriteString("Healthy: no condition yet\n")
	}
	s := h.Summary
	fmt.Fprintf(&b, "total=%d healthy=%d progressing=%d degraded=%d unknown=%d\n\n", s.Total, s.Healthy, s.Progressing, s.Degraded, s.Unknown)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tKIND\tNAMESPACE\tNAME\tSTATE\tRENDER\tMESSAGE")
	for _, e := range h.Entries {
		render := stateOr(e.RenderRef, "-")
		if e.AssessedRenderRef != e.RenderRef {
			render += " (assessed " + stateOr(e.AssessedRenderRef, "-") + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Wave, e.Kind, stateOr(e.Namespace, "-"), e.Name,
			stateOr(string(e.State), "(not assessed)"), render, stateOr(oneLine(e.Message), "-"))
	}
	if len(h.Entries) == 0 {
		fmt.Fprintln(tw, "-\t(no entries)\t\t\t\t\t")
	}
	_ = tw.Flush()
	header := false
	for _, e := range h.Entries {
		if e.Diagnosis == "" {
			continue
		}
		if !header {
			b.WriteString("\nDIAGNOSIS\n")
			header = true
		}
		fmt.Fprintf(&b, "%s %s: %s\n", e.Kind, objectName(e.Namespace, e.Name), oneLine(e.Diagnosis))
	}

	if len(h.Hooks) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOOK\tWORKLOAD\tSTATE\tMESSAGE")
		for _, k := range h.Hooks {
			fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\n", k.Name, k.WorkloadKind, objectName(k.Namespace, k.WorkloadName),
				stateOr(string(k.State), "(not polled)"), stateOr(oneLine(k.Message), "-"))
		}
		_ = tw.Flush()
	}
	return b.String()
}

// oneLine replaces control characters (which would break the columns) by spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// summaryLine counts the entries of snap by state for the final report.
func summaryLine(snap *snapshot) string {
	if snap == nil {
		return "no snapshot"
	}
	s := snap.Health.Summary
	cond := "no Healthy condition"
	if c := snap.condition(); c != nil {
		cond = fmt.Sprintf("Healthy=%s (%s)", c.Status, c.Reason)
	}
	return fmt.Sprintf("%s; %d entries: %d %s, %d %s, %d %s, %d %s", cond, s.Total,
		s.Healthy, v1alpha1.StateHealthy, s.Progressing, v1alpha1.StateProgressing,
		s.Degraded, v1alpha1.StateDegraded, s.Unknown, v1alpha1.StateUnknown)
}
