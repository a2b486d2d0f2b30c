package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kumodo/convoy-observer/internal/subresources"
)

// exitEndpointError is the exit status of release status when convoy-api cannot be
// reached or answers an error (for example 404 for a missing Release).
const exitEndpointError = 1

// defaultAPIURL is where convoy-api listens by default (its --bind-address :8090).
const defaultAPIURL = "http://127.0.0.1:8090"

// releaseStatusTimeout bounds the request to convoy-api.
const releaseStatusTimeout = 30 * time.Second

// releaseStatusOptions are the flags of release status.
type releaseStatusOptions struct {
	namespace string
	apiURL    string
}

// newReleaseCommand builds the release group.
func newReleaseCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Work with Releases",
		RunE:  runGroup,
	}
	cmd.AddCommand(newReleaseStatusCommand(env))
	return cmd
}

// newReleaseStatusCommand builds `release status NAME [-n NS] [--api-url URL]`.
func newReleaseStatusCommand(env *cliEnv) *cobra.Command {
	o := &releaseStatusOptions{}
	cmd := &cobra.Command{
		Use:   "status NAME [-n NAMESPACE] [--api-url URL]",
		Short: "Show the health of a Release's objects and hooks",
		Long: `Show the health of a Release as convoy-api's /health endpoint reports it: the entries
of its ReleaseInventory that the controller-manager records, with the state the health
loop last wrote for each, and its lifecycle hooks. Nothing is assessed on the way.

The first line names the release, whether every entry has the render of
status.lastAttempted (renderCurrent) and the counts by state. Entries are sorted by wave;
RENDER is the render that applied the object, with the render the state was assessed at
when that differs. Empty fields show as -.

Exit status: 0 on success, 1 when convoy-api cannot be reached or answers an error (such
as 404 for a missing Release), 2 on a usage error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(fmt.Errorf("%s needs exactly one release NAME, got %d arguments", cmd.CommandPath(), len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), env, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "default", "namespace of the Release")
	f.StringVar(&o.apiURL, "api-url", defaultAPIURL, "base URL of convoy-api")
	return cmd
}

// run fetches the health of the Release and prints it.
func (o *releaseStatusOptions) run(ctx context.Context, env *cliEnv, name string) error {
	u, err := url.Parse(o.apiURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError(fmt.Errorf("invalid --api-url %q: want http(s)://HOST[:PORT]", o.apiURL))
	}
	if o.namespace == "" {
		return usageError(errors.New("--namespace must not be empty"))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c := &subresources.Client{BaseURL: o.apiURL, HTTP: &http.Client{Timeout: releaseStatusTimeout}}
	h, err := c.Health(ctx, o.namespace, name)
	if err != nil {
		return &exitError{code: exitEndpointError, err: fmt.Errorf("release status %s/%s: %w", o.namespace, name, err)}
	}
	if err := printReleaseStatus(env.stdout, h); err != nil {
		return &exitError{code: exitEndpointError, err: fmt.Errorf("writing the output: %w", err)}
	}
	return nil
}

// printReleaseStatus prints h as a header line, the table of entries and, when there are
// hooks, the table of hooks.
func printReleaseStatus(out io.Writer, h *subresources.HealthResponse) error {
	s := h.Summary
	fmt.Fprintf(out, "Release %s  renderCurrent=%t  total=%d healthy=%d progressing=%d degraded=%d unknown=%d\n",
		h.Release, h.RenderCurrent, s.Total, s.Healthy, s.Progressing, s.Degraded, s.Unknown)
	fmt.Fprintln(out)
	if len(h.Entries) == 0 {
		fmt.Fprintln(out, "No inventory entries.")
	} else {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "WAVE\tKIND\tNAMESPACE\tNAME\tSTATE\tRENDER\tMESSAGE")
		for _, e := range h.Entries {
			kind := e.Kind
			if e.Group != "" {
				kind += "." + e.Group
			}
			render := e.RenderRef
			if e.AssessedRenderRef != "" && e.AssessedRenderRef != e.RenderRef {
				render += " (assessed " + e.AssessedRenderRef + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Wave, cell(kind), cell(e.Namespace), cell(e.Name),
				cell(string(e.State)), cell(render), cell(e.Message))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(h.Hooks) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "HOOKS")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tNAMESPACE\tWORKLOAD\tSTATE\tCREATED\tFINISHED\tMESSAGE")
	for _, k := range h.Hooks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(k.Name), cell(k.WorkloadKind), cell(k.Namespace),
			cell(k.WorkloadName), cell(string(k.State)), timeCell(k.CreatedAt), timeCell(k.FinishedAt), cell(k.Message))
	}
	return tw.Flush()
}

// cell makes s one table cell: - when empty, control characters (which would break
// the columns) as spaces.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// timeCell formats t in RFC 3339 UTC, or - when unset.
func timeCell(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
