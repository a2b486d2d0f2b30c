package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Exit statuses of convoyctl release wait that the demo expects (convoyctl release wait
// --help).
const (
	waitHealthy  = 0
	waitDegraded = 3
)

// releaseWait runs `convoyctl release wait` on the Release as a CI pipeline would, shows
// its output, and fails unless it exits with want.
func (s *scenario) releaseWait(ctx context.Context, want int) error {
	args := []string{"release", "wait", s.d.name, "-n", s.d.namespace,
		"--kubeconfig", s.cli.kubeconfig, "--timeout", "1m", "--interval", "500ms"}
	if s.cli.apiURL != "" {
		args = append(args, "--api-url", s.cli.apiURL)
	}
	s.disp.Event("$ convoyctl %s", strings.Join(args[:5], " "))
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, s.cli.convoyctl, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		return fmt.Errorf("running convoyctl release wait: %w", err)
	}
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		s.disp.Event("  %s", line)
	}
	s.disp.Event("convoyctl release wait exited %d", code)
	if code != want {
		return fmt.Errorf("convoyctl release wait exited %d, want %d:\n%s", code, want, out.String())
	}
	return nil
}

// cliAccess is what the demo needs to run convoyctl; without apiURL, convoyctl goes
// through the kubeconfig's kube-apiserver.
type cliAccess struct {
	convoyctl, kubeconfig, apiURL string
}

// releaseEvents returns the Events (events.k8s.io/v1) about the Release, oldest first.
func releaseEvents(ctx context.Context, c client.Client, namespace, name string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the Events of namespace %s: %w", namespace, err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Release" && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(&out[i]).Before(eventTime(&out[j])) })
	return out, nil
}

// eventTime is when the Event last happened.
func eventTime(e *eventsv1.Event) time.Time {
	if e.Series != nil {
		return e.Series.LastObservedTime.Time
	}
	return e.EventTime.Time
}

// printEvents prints the Events as `kubectl describe` does.
func printEvents(out io.Writer, events []eventsv1.Event, now time.Time) {
	if len(events) == 0 {
		fmt.Fprintln(out, "Events:  <none>")
		return
	}
	fmt.Fprintln(out, "Events:")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tReason\tAge\tFrom\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t----\t----\t-------")
	for i := range events {
		e := &events[i]
		age := now.Sub(eventTime(e)).Round(time.Second).String()
		if e.Series != nil {
			age += fmt.Sprintf(" (x%d)", e.Series.Count)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, e.ReportingController, e.Note)
	}
	_ = tw.Flush()
}

// missingReasons returns the reasons of want that no Event has.
func missingReasons(events []eventsv1.Event, want ...string) []string {
	have := map[string]bool{}
	for _, e := range events {
		have[e.Reason] = true
	}
	var out []string
	for _, r := range want {
		if !have[r] {
			out = append(out, r)
		}
	}
	return out
}

// showEvents prints the Events of the Release, kubectl-describe style, once the ones the
// scenario must have produced are there: Healthy (from the Degraded of r2 when r2 is
// rolled back, and from Progressing after r1 unless r1's first condition was Healthy
// already, which is no edge), HookSucceeded, Degraded at r2. The recorder sends them
// asynchronously, so it waits for them as long as the scenario may run (ctx), not for a
// fixed time: a slow machine delays them, it does not lose them.
func showEvents(ctx context.Context, c client.Client, namespace, name string, out io.Writer) error {
	want := []string{"Healthy", "HookSucceeded", "Degraded"}
	var events []eventsv1.Event
	var missing []string
	for waiting := true; waiting; {
		var err error
		if events, err = releaseEvents(ctx, c, namespace, name); err != nil {
			return err
		}
		if missing = missingReasons(events, want...); len(missing) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			waiting = false
		case <-time.After(500 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "\nkubectl describe release %s -n %s\n", name, namespace)
	printEvents(out, events, time.Now())
	fmt.Fprintln(out)
	if len(missing) > 0 {
		return fmt.Errorf("the Release has no Event of reason %s", strings.Join(missing, ", "))
	}
	return nil
}
