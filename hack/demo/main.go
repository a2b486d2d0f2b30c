// Command demo is `make demo`: it shows convoy-observer's health loop at work on a
// local simulated cluster.
//
// It starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (with
// two fake nodes) from the binaries of hack/controlplane.sh, installs the CRDs and the
// default rule set health/convoy-defaults.yaml, builds and runs convoy-api and
// convoy-observer as separate processes, and then plays convoy's controller-manager for
// one Release (the driver, driver.go: a demo stand-in, not a product component). The
// good render r1 rolls out in two waves with a hook Job between them until everything
// is Healthy; the bad render r2 gives the Deployment Pods that no node can take, and
// the Deployment goes Progressing, then Degraded when the health deadline passes. A
// table of the Release's entries, hooks and Healthy condition (from convoy-api's
// /health endpoint) is printed whenever it changes.
//
//	demo [--once] [--timeout 4m] [--keep] [--race] [--install [--from-chart] [--audit-log F] [--metrics-dir D]]
//
// With --install it runs convoy-api and convoy-observer as config/default ships them
// (install.go: its RBAC and ServiceAccounts, their tokens, its arguments and APIService)
// instead of as the cluster's administrator; --audit-log writes the kube-apiserver's
// audit log of their requests, --metrics-dir their /metrics at the end (test/install).
//
// Without --once it then keeps everything up until Ctrl-C and prints how to reach it.
// With --once it exits 0 when every expected state was reached and 1 with the reason
// otherwise. Every process it starts is stopped on exit, on Ctrl-C and on failure.
//
// It is a development tool, not a product component.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/kumodo/convoy-observer/internal/localcluster"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// options are the command-line flags.
type options struct {
	once    bool
	timeout time.Duration
	keep    bool
	race    bool
	// install runs the components as config/default ships them; auditLog and
	// metricsDir are where their requests and their metrics go.
	install              bool
	fromChart            bool          // with install: the chart's rendering instead of config/default
	crashAfter           time.Duration // how old a Pod of r4 is when it shows its crash loop
	auditLog, metricsDir string
}

func main() {
	var o options
	flag.BoolVar(&o.once, "once", false, "run the scenario without waiting for Ctrl-C: exit 0 when every expected state was reached, 1 with the reason otherwise")
	flag.DurationVar(&o.timeout, "timeout", 4*time.Minute, "give up when the scenario (cluster start and builds included) has not finished after this long")
	flag.BoolVar(&o.keep, "keep", false, "keep the state directory (kubeconfig, logs, etcd data) on exit")
	flag.BoolVar(&o.race, "race", false, "build convoy-api and convoy-observer with the race detector and fail when it reports a race (the e2e test's mode)")
	flag.DurationVar(&o.crashAfter, "crash-after", 0, "how old a Pod of r4 is when the demo shows its container crash-looping (0: as soon as it is scheduled); a few seconds play a container that starts and exits first, so the observer sees the Pods start before failFast decides")
	flag.BoolVar(&o.install, "install", false, "run convoy-api and convoy-observer as config/default ships them: its RBAC, the tokens of its ServiceAccounts, its arguments and APIService")
	flag.BoolVar(&o.fromChart, "from-chart", false, "with --install: install what the Helm chart charts/convoy-observer renders (values namespace.create=true) instead of config/default")
	flag.StringVar(&o.auditLog, "audit-log", "", "with --install: write the kube-apiserver's audit log of the install's ServiceAccounts here (JSON lines)")
	flag.StringVar(&o.metricsDir, "metrics-dir", "", "with --install: write the /metrics of convoy-observer and convoy-api here at the end")
	flag.Parse()
	if flag.NArg() > 0 || o.timeout <= 0 || o.crashAfter < 0 || (!o.install && (o.auditLog != "" || o.metricsDir != "" || o.fromChart)) {
		fmt.Fprintf(os.Stderr, "usage: demo [--once] [--timeout D] [--keep] [--race] [--crash-after D] [--install [--from-chart] [--audit-log F] [--metrics-dir D]]\n")
		os.Exit(2)
	}
	// The handler stays installed until the cleanup is over: a second Ctrl-C must not
	// kill the demo before it stopped the processes it started. SIGHUP (the terminal
	// closed) cleans up too.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: FAILED: %v\n", err)
		os.Exit(1)
	}
}

// run runs the demo. ctx ends with Ctrl-C; every process started lives until run
// returns.
func run(ctx context.Context, o options, out io.Writer) (err error) {
	start := time.Now()
	logf := func(format string, args ...any) { fmt.Fprintf(out, "demo: "+format+"\n", args...) }

	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	assets, err := localcluster.FindAssets(root)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "convoy-demo-")
	if err != nil {
		return err
	}
	defer func() {
		if o.keep {
			logf("state directory kept: %s", dir)
		} else if rmErr := os.RemoveAll(dir); rmErr != nil {
			logf("cannot remove the state directory: %v", rmErr)
		}
	}()
	// The scenario's deadline; the processes live on ctx, so that after a failure
	// without --once they stay up for inspection.
	sctx, cancel := context.WithTimeoutCause(ctx, o.timeout, errTimeout)
	defer cancel()

	logf("state directory %s; control-plane binaries from %s", dir, assets)
	logf("starting the local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and building convoy-api and convoy-observer ...")
	binDir, logDir, pki := filepath.Join(dir, "bin"), filepath.Join(dir, "logs"), filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	// The aggregation layer: the kube-apiserver proxies subresources.convoy.kumodo.io to
	// convoy-api, as in a real cluster.
	agg, err := testenv.NewAggregation(pki)
	if err != nil {
		return err
	}
	apiServerArgs := agg.APIServerArgs()
	var in *installed
	if o.install {
		if in, err = renderInstall(root, o.fromChart); err != nil {
			return err
		}
	}
	if o.install && o.auditLog != "" {
		audit, err := writeAuditPolicy(pki, in.namespace, o.auditLog)
		if err != nil {
			return err
		}
		for k, v := range audit {
			apiServerArgs[k] = v
		}
	}
	var cluster *localcluster.Cluster
	g, gctx := errgroup.WithContext(sctx)
	g.Go(func() error { return buildComponents(gctx, root, binDir, o.race) })
	g.Go(func() error {
		var err error
		cluster, err = localcluster.Start(ctx, localcluster.Options{
			AssetsDir: assets, Dir: dir, Scheme: testenv.NewScheme(),
			CRDDirs:       []string{filepath.Join(root, "config", "crd", "bases")},
			APIServerArgs: apiServerArgs,
			Logf:          func(format string, args ...any) { logf("cluster: "+format, args...) },
		})
		return err
	})
	err = g.Wait()
	defer cluster.Stop()
	if err != nil {
		return explain(sctx, "starting", err)
	}
	var comps *components
	if o.install {
		logf("convoy-api and convoy-observer built; installing %s", in.source)
		comps, err = startInstalled(ctx, in, binDir, cluster, agg, logDir, logf)
	} else {
		rules := filepath.Join(root, "health", "convoy-defaults.yaml")
		if err := testenv.ApplyFile(sctx, cluster.Client, rules, userManager); err != nil {
			return explain(sctx, "installing the default rules", err)
		}
		logf("CRDs and the GlobalHealthRuleSet convoy-defaults installed; convoy-api and convoy-observer built")
		comps, err = startComponents(ctx, binDir, cluster, agg, logDir)
	}
	defer comps.Stop()
	if err != nil {
		return explain(sctx, "starting convoy-api and convoy-observer", err)
	}
	if o.install {
		logf("convoy-api and convoy-observer run as the ServiceAccounts convoy-system/convoy-api and convoy-system/convoy-observer of config/default")
	}
	logf("convoy-api serving at %s behind the kube-apiserver (APIService %s); convoy-observer wakes the controller-manager through the kube-apiserver (%s since start)",
		comps.APIURL, testenv.APIServiceName, since(start))

	rel, err := setupRelease(sctx, cluster.Client)
	if err != nil {
		return explain(sctx, "creating the Release", err)
	}
	logf("Release %s/%s created: Cluster %q (the local cluster), default rules, deadline %s, interval %s",
		rel.Namespace, rel.Name, clusterName, healthDeadline, syncInterval)

	disp := newDisplay(out, !o.once && isTerminal(os.Stdout))
	s := &scenario{
		d:    newDriver(cluster.Client, rel),
		disp: disp,
		m: &monitor{
			c: cluster.Client, namespace: rel.Namespace, name: rel.Name,
			api: syncapiclient.NewClient(apiConfig(cluster)),
		},
		checks:     []func() error{cluster.Check, comps.Check},
		cli:        cliAccess{convoyctl: filepath.Join(binDir, "convoyctl"), kubeconfig: cluster.KubeconfigPath}, // through the kube-apiserver
		crashAfter: o.crashAfter,
	}
	s.m.onSync = func(n int, at string) {
		disp.Event("sync request #%d from the observer (%s=%s)", n, "convoy.kumodo.io/sync-requested-at", at)
	}
	runErr := s.run(sctx)
	var stopped *stopError
	if runErr != nil && !errors.As(runErr, &stopped) && sctx.Err() != nil {
		runErr = explain(sctx, "the scenario", runErr) // an action cut short
	}
	if o.race && runErr == nil {
		runErr = comps.Races()
	}
	if runErr == nil {
		runErr = showEvents(sctx, cluster.Client, rel.Namespace, rel.Name, out)
	}
	if runErr == nil && o.metricsDir != "" {
		if runErr = scrapeMetrics(sctx, comps, cluster, o.metricsDir); runErr == nil {
			logf("metrics of convoy-observer and convoy-api written to %s", o.metricsDir)
		}
	}
	if runErr == nil {
		report(logf, s, start)
	} else {
		fmt.Fprintf(out, "\ndemo: the scenario failed after %s; last state: %s\n", since(start), summaryLine(s.last))
		for _, p := range []*localcluster.Process{comps.Observer, comps.API} {
			fmt.Fprintf(out, "demo: the end of %s:\n%s\n", p.LogPath, p.LogTail(20))
		}
	}
	if o.once || ctx.Err() != nil { // --once, or interrupted: stop now
		return runErr
	}
	if runErr != nil {
		fmt.Fprintf(out, "demo: FAILED: %v\n", runErr)
	}
	printAccess(out, cluster, comps, agg, dir, o.keep)
	<-ctx.Done()
	fmt.Fprintln(out, "\ndemo: stopping ...")
	return runErr
}

// report prints how the scenario went.
func report(logf func(string, ...any), s *scenario, start time.Time) {
	logf("PASS in %s: everything Healthy after r1 (hook Succeeded), then the bad Deployment Progressing and Degraded at r2, then, after a rollback (r3), Degraded at once by failFast at r4 (crash loop)", since(start))
	for _, r := range s.results {
		logf("  %-16s %6s  %d sync request(s)", r.Name, r.Duration.Round(100*time.Millisecond), r.Syncs)
	}
	logf("final state: %s", summaryLine(s.last))
}

// apiConfig is the admin's config of the cluster with a request timeout, for /health
// through the kube-apiserver.
func apiConfig(c *localcluster.Cluster) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Timeout = 10 * time.Second
	return cfg
}

// printAccess tells how to reach the running demo.
func printAccess(out io.Writer, c *localcluster.Cluster, comps *components, agg *testenv.Aggregation, dir string, keep bool) {
	fmt.Fprintf(out, `
demo: everything stays up until Ctrl-C.
  kubeconfig:     %s
  convoy-api:     %s (serving CA %s), behind the kube-apiserver as APIService %s
  release status: go run ./cmd/convoyctl release status %s -n %s --kubeconfig %s
  health:         kubectl --kubeconfig %s get --raw %s
  kubectl:        kubectl --kubeconfig %s get releases,releaseinventories,pods -n %s
  logs:           %s
`, c.KubeconfigPath, comps.APIURL, agg.ServingCAFile, testenv.APIServiceName,
		releaseName, demoNamespace, c.KubeconfigPath,
		c.KubeconfigPath, syncapi.HealthPath(demoNamespace, releaseName),
		c.KubeconfigPath, demoNamespace, filepath.Join(dir, "logs"))
	if !keep {
		fmt.Fprintf(out, "  (the state directory %s is removed on exit; --keep keeps it)\n", dir)
	}
}

// explain wraps err from step, naming the timeout or the interrupt when one ended it.
func explain(ctx context.Context, step string, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errTimeout):
		return fmt.Errorf("%s: timed out: %w", step, err)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: interrupted: %w", step, err)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// isTerminal reports whether f is a terminal (character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// since formats the time since t.
func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
