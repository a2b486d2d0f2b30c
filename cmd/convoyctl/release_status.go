package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// exitEndpointError is the exit status of release status when the subresources cannot
// be reached or answer an error (for example 404 for a missing Release, 403 when the
// user may not read it).
const exitEndpointError = 1

// releaseRequestTimeout bounds each request to the syncapi.
const releaseRequestTimeout = 30 * time.Second

// releaseAPIFlags choose how convoyctl reaches the Release subresources: through the
// kube-apiserver of a kubeconfig (the default, as the kubeconfig's user), or at a direct
// URL of convoy-api (--api-url) with the kubeconfig's credentials when there is one.
// The release commands share them; connect turns them into a client.
type releaseAPIFlags struct {
	apiURL, apiCAFile string
}

// add registers the flags on fs.
func (f *releaseAPIFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.apiURL, "api-url", "", "base URL of convoy-api itself, bypassing the kube-apiserver (debugging); the kubeconfig's credentials are sent when there is one")
	fs.StringVar(&f.apiCAFile, "api-ca-file", "", "PEM CA that signed convoy-api's serving certificate, for an https --api-url (default: the system roots)")
}

// connect returns a client for the subresources and the namespace to use. Bad flags are
// usage errors; an unusable kubeconfig is an endpoint error.
func (f *releaseAPIFlags) connect(conn *connection) (*syncapiclient.Client, string, error) {
	if f.apiURL != "" {
		u, err := url.Parse(f.apiURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "", usageError(fmt.Errorf("invalid --api-url %q: want http(s)://HOST[:PORT]", f.apiURL))
		}
	} else if f.apiCAFile != "" {
		return nil, "", usageError(errors.New("--api-ca-file needs --api-url"))
	}
	cfg, err := conn.restConfig()
	namespace := "default"
	switch {
	case err == nil:
		if namespace, err = conn.defaultNamespace(); err != nil {
			return nil, "", &exitError{code: exitEndpointError, err: err}
		}
	case errors.Is(err, errNoKubeconfig) && f.apiURL != "":
		cfg = &rest.Config{} // no kubeconfig at all: an anonymous call to --api-url
		if ns := conn.namespace(); ns != "" {
			namespace = ns
		}
	default:
		return nil, "", &exitError{code: exitEndpointError, err: fmt.Errorf("%w (or use --api-url)", err)}
	}
	cfg.Timeout = releaseRequestTimeout
	if f.apiURL != "" {
		cfg = syncapiclient.DirectConfig(cfg, f.apiURL, f.apiCAFile)
	}
	return syncapiclient.NewClient(cfg), namespace, nil
}

// fetchReleaseHealth returns the HealthResult of the Release namespace/name; an error
// (the Release is missing, access is denied, nothing answers) exits with
// exitEndpointError and names the Release.
func fetchReleaseHealth(ctx context.Context, c *syncapiclient.Client, namespace, name string) (*syncapi.HealthResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	h, err := c.Health(ctx, namespace, name)
	if err != nil {
		return nil, &exitError{code: exitEndpointError, err: fmt.Errorf("reading the health of release %s/%s: %w", namespace, name, err)}
	}
	return h, nil
}

// newReleaseCommand builds the release group.
func newReleaseCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Work with Releases",
		RunE:  runGroup,
	}
	cmd.AddCommand(newReleaseStatusCommand(env))
	cmd.AddCommand(newReleaseWaitCommand(env))
	return cmd
}

// newReleaseStatusCommand builds `release status NAME [-n NS] [--kubeconfig F]
// [--context C] [--api-url URL [--api-ca-file F]]`.
func newReleaseStatusCommand(env *cliEnv) *cobra.Command {
	f := &releaseAPIFlags{}
	var watch, explainFlag bool
	var interval time.Duration
	var output string
	cmd := &cobra.Command{
		Use:   "status NAME [-n NAMESPACE] [--kubeconfig F] [--context C] [--api-url URL] [--watch [--interval D]]",
		Short: "Show the health of a Release's objects and hooks",
		Long: `Show the health of a Release as the /health subresource reports it: the entries
of its ReleaseInventory that the controller-manager records, with the state the health
loop last wrote for each, and its lifecycle hooks. Nothing is assessed on the way.

The request goes to the kube-apiserver of the kubeconfig, as its user, and the
kube-apiserver passes it on to convoy-api (the APIService
v1alpha1.subresources.convoy.kumodo.io): the user needs get on releases/health in group
subresources.convoy.kumodo.io (the ClusterRole convoy-release-health-reader). --api-url
sends it to convoy-api directly instead, which authenticates and authorizes it the same
way.

The first line names the release, whether every entry has the render of
status.lastAttempted (renderCurrent), the counts by state and, when convoy-api counts the
rules of each entry, unjudged: the entries that no rule the Release selects judges.
Entries are sorted by wave; STATE ends in "(no rule)" for such an entry ("Healthy (no
rule)": nothing failed because nothing judged it; the health coverage command lists
the kinds no rule judges). RENDER is the render that applied the object, with the render the
state was assessed at when that differs. Empty fields show as -.

-o json prints the HealthResult as JSON instead. Each entry has "rulesApplied": the
number of selected rules that match its apiVersion and resource, less those that pass it by
its apiVersion alone (0: no rule judges it;
null before the observer recorded it). Each entry that is not Healthy has "decidedBy":
the rule that decided it (rule set kind, namespace, name, rule index) and the cause:
RuleFailed (Progressing), DeadlinePassed (a failing rule, Degraded once the deadline
passed), Failed (a terminal failure, Degraded at once), FailedFast (the workload's diagnosis
is terminal and spec.healthAssessment.failFast is on: Degraded at once) or EvaluationError
(Unknown); null when no rule decided it (the object is missing
or unreadable). The observer records both with the entry's state, and convoy-api answers
them from the inventory; "decidedByError" says how many entries an observer that does not
record them left without them. --explain ends the table output with the same explanations.

--watch reads the health again every --interval and prints it whenever it changes (on a
terminal it redraws the screen) until interrupted; a failed read is reported and retried.

Exit status: 0 on success, 1 when the request fails (the Release does not exist, access
is denied, nothing answers, the kubeconfig is unusable), 2 on a usage error.`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return usageError(fmt.Errorf("invalid --output %q: want table or json", output))
			}
			fetch, _, err := f.fetcher(env.conn, args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if watch {
				if interval <= 0 {
					return usageError(errors.New("--interval must be positive"))
				}
				return runWatch(ctx, env, fetch, interval)
			}
			h, err := fetch(ctx)
			if err != nil {
				return err
			}
			if output == "json" {
				err = printJSON(env.stdout, h)
			} else if err = printReleaseStatus(env.stdout, h); err == nil && explainFlag {
				printExplanations(env.stdout, h)
			}
			if err != nil {
				return &exitError{code: exitEndpointError, err: fmt.Errorf("writing the output: %w", err)}
			}
			return nil
		},
	}
	f.add(cmd.Flags())
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print the status again whenever it changes, until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", defaultPollInterval, "with --watch, time between two reads")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().BoolVar(&explainFlag, "explain", false, "end the table with the rule that decides each entry that is not Healthy (the decidedBy of /health)")
	return cmd
}

// printReleaseStatus prints h as a header line, the table of entries and, when there are
// hooks, the table of hooks.
func printReleaseStatus(out io.Writer, h *syncapi.HealthResult) error {
	s := h.Summary
	fmt.Fprintf(out, "Release %s  renderCurrent=%t  total=%d healthy=%d progressing=%d degraded=%d unknown=%d",
		sanitize(h.Release), h.RenderCurrent, s.Total, s.Healthy, s.Progressing, s.Degraded, s.Unknown)
	counted, none := 0, 0
	for i := range h.Entries {
		if h.Entries[i].RulesApplied != nil {
			counted++
		}
		if unjudged(&h.Entries[i]) {
			none++
		}
	}
	if counted > 0 {
		fmt.Fprintf(out, "  unjudged=%d", none)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out)
	if len(h.Entries) == 0 {
		fmt.Fprintln(out, "No inventory entries.")
	} else if err := printEntries(out, h.Entries); err != nil {
		return err
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

// timeCell formats t in RFC 3339 UTC, or - when unset.
func timeCell(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
