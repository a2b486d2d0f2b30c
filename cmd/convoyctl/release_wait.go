package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// Exit statuses of release wait, besides exitOK, exitEndpointError and exitUsage.
const (
	// exitDegraded: the Release turned Degraded while waiting for it to be Healthy.
	exitDegraded = 3
	// exitTimeout: --timeout passed before the Release reached the awaited state.
	exitTimeout = 4
)

// Defaults of release wait and release status --watch.
const (
	defaultWaitTimeout  = 10 * time.Minute
	defaultPollInterval = 2 * time.Second
)

// healthFetch reads the HealthResult of one Release, through the same path as release
// status; its error is already an *exitError.
type healthFetch func(ctx context.Context) (*syncapi.HealthResult, error)

// waitTarget is what --for asks for.
type waitTarget struct {
	// reason is the awaited reason (one of waitReasons).
	reason string
	// failOnDegraded ends the wait with exitDegraded when the Release turns Degraded.
	failOnDegraded bool
}

// parseWaitFor reads --for: healthy, degraded, or condition=REASON.
func parseWaitFor(s string) (waitTarget, error) {
	switch strings.ToLower(s) {
	case "healthy":
		return waitTarget{reason: reasonHealthy, failOnDegraded: true}, nil
	case "degraded":
		return waitTarget{reason: reasonDegraded}, nil
	}
	if r, ok := strings.CutPrefix(s, "condition="); ok {
		for _, want := range waitReasons {
			if strings.EqualFold(r, want) {
				return waitTarget{reason: want, failOnDegraded: want == reasonHealthy}, nil
			}
		}
	}
	return waitTarget{}, fmt.Errorf("invalid --for %q: want healthy, degraded or condition=REASON with REASON one of %s",
		s, strings.Join(waitReasons, ", "))
}

// waitOptions are the flags of release wait.
type waitOptions struct {
	forFlag  string
	timeout  time.Duration
	interval time.Duration
}

// newReleaseWaitCommand builds `release wait NAME [-n NS] [--for …] [--timeout D]`.
func newReleaseWaitCommand(env *cliEnv) *cobra.Command {
	o := &waitOptions{}
	src := &releaseAPIFlags{}
	cmd := &cobra.Command{
		Use:   "wait NAME [-n NAMESPACE] [--for healthy|degraded|condition=REASON] [--timeout D]",
		Short: "Wait until a Release is Healthy for its current render (for CI pipelines)",
		Long: `Wait until a Release reaches a state, reading its health the way release status does
(the /health subresource, through the kube-apiserver of the kubeconfig or at --api-url)
every --interval.

--for healthy (the default) waits until the Release is Healthy for its current render:
every entry of its inventory has the render of status.lastAttempted (renderCurrent), was
assessed at that render, and is Healthy (a Release without entries is Healthy). It stops
at once when the Release turns Degraded, printing the Degraded entries and the rule that
decides each (the decidedBy of /health, or its decidedByError: why it could not say). --for degraded
waits until it is Degraded. --for condition=REASON waits for one reason of the Release's
Healthy condition: Healthy, Progressing, Degraded, Unknown or Pending (entries of another
render, or not assessed at their render yet). Hooks are shown by release status but do
not count, as for the Healthy condition.

A failed read is retried until the timeout, except a missing Release or a denied
request, which end the wait at once. A read that started before the timeout may finish
up to 1s after it; one that gets no answer by then is given up, so the wait ends at
most 1s after --timeout.

Exit status:
  0  the Release reached the state
  1  the health cannot be read (the Release does not exist, access is denied, the
     last read that ended before the timeout failed, or no read answered in time)
  2  usage error
  3  the Release turned Degraded while waiting for healthy (the Degraded entries are printed)
  4  --timeout passed or the wait was interrupted (the entries that are still not Healthy
     are printed)`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := parseWaitFor(o.forFlag)
			if err != nil {
				return usageError(err)
			}
			if o.timeout <= 0 || o.interval <= 0 {
				return usageError(errors.New("--timeout and --interval must be positive"))
			}
			fetch, namespace, err := src.fetcher(env.conn, args[0])
			if err != nil {
				return err
			}
			return runWait(cmd.Context(), env, namespace+"/"+args[0], fetch, target, o)
		},
	}
	f := cmd.Flags()
	src.add(f)
	f.StringVar(&o.forFlag, "for", "healthy", "state to wait for: healthy, degraded, or condition=REASON (Healthy, Progressing, Degraded, Unknown, Pending)")
	f.DurationVar(&o.timeout, "timeout", defaultWaitTimeout, "give up after this long (exit 4)")
	f.DurationVar(&o.interval, "interval", defaultPollInterval, "time between two reads of the health")
	return cmd
}

// readGrace is how long a read that started before --timeout may still run after it.
const readGrace = time.Second

// runWait polls fetch until the target is reached (nil), the Release turns Degraded
// when that is fatal (exitDegraded), a read fails for good (exitEndpointError), or the
// timeout passes (exitTimeout, or exitEndpointError when the last read that ended failed
// or no read answered at all). It prints a line each time the state changes. It returns
// at most readGrace after the timeout.
func runWait(ctx context.Context, env *cliEnv, release string, fetch healthFetch, target waitTarget, o *waitOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var last verdict
	var lastLine string
	var lastErr error
	var done error          // the outcome when the condition function ends the poll
	var notExplained string // the last result's decidedByError
	var cut bool            // the last read got no answer before its deadline
	// A read may run until readGrace after the timeout, not only until the timeout: a
	// read that the timeout would cut short (or that the client's rate limiter refuses to
	// start so close to it) is not a failed read, and a read that started in time may
	// still answer. A read that gets no answer by then is cut; it is not a failed read
	// either, and the timeout, which has passed, ends the poll. No read starts after the
	// timeout.
	readDeadline := time.Now().Add(o.timeout + readGrace)
	poll := func(context.Context) (bool, error) {
		rctx, cancel := context.WithDeadline(ctx, readDeadline)
		h, err := fetch(rctx)
		cut = err != nil && rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil && ctx.Err() != nil {
			return true, nil //nolint:nilerr // interrupted: the wait's own end, not a failed read
		}
		if cut {
			return false, nil
		}
		if err != nil {
			if fatalReadError(err) {
				done = err
				return true, nil
			}
			if lastErr == nil || lastErr.Error() != err.Error() {
				fmt.Fprintf(env.stderr, "%s: %s (retrying)\n", env.name, sanitizeLines(err.Error()))
			}
			lastErr = err
			return false, nil
		}
		lastErr = nil
		last = judge(h)
		notExplained = h.DecidedByError
		if line := last.reason + ": " + last.detail; line != lastLine {
			fmt.Fprintf(env.stdout, "%s release %s is %s\n", env.now().UTC().Format(time.TimeOnly), release, line)
			lastLine = line
		}
		switch {
		case last.reason == target.reason:
			return true, nil
		case target.failOnDegraded && last.reason == reasonDegraded:
			fmt.Fprintln(env.stdout)
			_ = printEntries(env.stdout, last.notHealthy)
			printDeciders(env.stdout, last.notHealthy, notExplained)
			done = &exitError{code: exitDegraded, err: fmt.Errorf("release %s is Degraded: %s", release, last.detail)}
			return true, nil
		}
		return false, nil
	}
	err := wait.PollUntilContextTimeout(ctx, o.interval, o.timeout, true, poll)
	timedOut := fmt.Sprintf("timed out after %s waiting for release %s to be %s", o.timeout, release, target.reason)
	switch {
	case done != nil:
		return done
	case ctx.Err() != nil:
		return &exitError{code: exitTimeout, err: fmt.Errorf("interrupted while waiting for release %s to be %s", release, target.reason)}
	case err == nil:
		return nil
	case lastErr != nil && cut:
		return &exitError{code: exitEndpointError, err: fmt.Errorf("%s; the last read got no answer in time, the one before failed: %w", timedOut, lastErr)}
	case lastErr != nil:
		return &exitError{code: exitEndpointError, err: fmt.Errorf("%s; the last read failed: %w", timedOut, lastErr)}
	case last.reason == "":
		return &exitError{code: exitEndpointError, err: fmt.Errorf("%s; no read of its health answered in time", timedOut)}
	}
	if len(last.notHealthy) > 0 {
		fmt.Fprintf(env.stdout, "\nNot Healthy yet:\n")
		_ = printEntries(env.stdout, last.notHealthy)
		printDeciders(env.stdout, last.notHealthy, notExplained)
	}
	state := "it is"
	if cut {
		state = "the last read got no answer in time; at the one before it was"
	}
	return &exitError{code: exitTimeout, err: fmt.Errorf("%s; %s %s: %s", timedOut, state, last.reason, last.detail)}
}

// fatalReadError reports whether a failed read can never succeed by waiting: the
// Release does not exist, or the caller may not read it.
func fatalReadError(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// fetcher connects with the flags and returns the read of the health of the Release
// name, the one path of release status, release status --watch and release wait, and
// the namespace it reads in.
func (f *releaseAPIFlags) fetcher(conn *connection, name string) (healthFetch, string, error) {
	c, namespace, err := f.connect(conn)
	if err != nil {
		return nil, "", err
	}
	return func(ctx context.Context) (*syncapi.HealthResult, error) {
		return fetchReleaseHealth(ctx, c, namespace, name)
	}, namespace, nil
}

// exactlyOneName is the Args check of the release commands.
func exactlyOneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError(fmt.Errorf("%s needs exactly one release NAME, got %d arguments", cmd.CommandPath(), len(args)))
	}
	if args[0] == "" {
		return usageError(fmt.Errorf("%s needs a release NAME, got an empty one", cmd.CommandPath()))
	}
	return nil
}
