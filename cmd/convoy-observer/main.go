// Command convoy-observer runs the observer loops of convoy (today the health loop,
// docs/design.md) in one controller-runtime manager, with leader election per
// shard, metrics and health probes. Its flags are the option groups of
// internal/observer plus component-base's logging flags, one section each in --help.
// Logs are JSON lines on stderr by default (--logging-format); --version prints the
// version, the commit and its date to stdout. Exit status: 0 after a graceful
// shutdown, 1 when it cannot start or its manager fails, 2 on a usage error.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kumodo/convoy-observer/internal/observer"
	"github.com/kumodo/convoy-observer/internal/ownconfig"
	"github.com/kumodo/convoy-observer/internal/version"
)

func main() {
	os.Exit(run(ctrl.SetupSignalHandler(), os.Args[1:], os.Stdout, os.Stderr))
}

// command holds the parsed flags of convoy-observer.
type command struct {
	options *observer.Options
	logging *logsapi.LoggingConfiguration
	version bool
}

// parse parses args (without the program name). Errors are usage errors; -h is
// pflag.ErrHelp.
func parse(args []string, stderr io.Writer) (*command, error) {
	c := &command{options: observer.NewOptions(), logging: logsapi.NewLoggingConfiguration()}
	c.logging.Format = logsapi.JSONLogFormat // JSON lines by default, as collectors expect
	fss := flagSets(c)
	fs := pflag.NewFlagSet("convoy-observer", pflag.ContinueOnError)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	fs.SetOutput(stderr) // --help, usage errors and deprecation warnings
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: convoy-observer [flags]\n")
		cliflag.PrintSections(stderr, *fss, 0)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, nil
}

// flagSets returns the sections of --help: the observer's option groups, logging and
// --version.
func flagSets(c *command) *cliflag.NamedFlagSets {
	fss := &cliflag.NamedFlagSets{}
	c.options.AddFlags(fss)
	logsapi.AddFlags(c.logging, fss.FlagSet("logging"))
	fss.FlagSet("generic").BoolVar(&c.version, "version", false, "print the version, the commit and its date, and exit")
	return fss
}

// run parses args, runs the manager until ctx is done and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "convoy-observer: %v\nRun 'convoy-observer -h' for usage.\n", err)
		return 2
	case c.version:
		fmt.Fprint(stdout, version.Line("convoy-observer"))
		return 0
	}
	// One logger for everything: component-base's (JSON by default) becomes klog's,
	// and controller-runtime logs through klog, so client-go's own lines (a reflector's
	// watch warnings, a throttled request) are lines of the same format.
	if err := logsapi.ValidateAndApply(c.logging, nil); err != nil {
		fmt.Fprintf(stderr, "convoy-observer: %v\n", err)
		return 2
	}
	ctrl.SetLogger(klog.Background())
	defer klog.Flush()
	log := ctrl.Log.WithName("setup")
	o := c.options
	if err := o.Validate(); err != nil {
		log.Error(nil, err.Error())
		return 2
	}
	cfg, err := ownconfig.Load(o.Management.Kubeconfig)
	if err != nil {
		log.Error(err, "loading the kubeconfig")
		return 1
	}
	mgr, err := observer.New(ctx, cfg, o)
	if err != nil {
		log.Error(err, "setting up convoy-observer")
		return 1
	}
	wake := "through the kube-apiserver " + cfg.Host
	switch {
	case o.WakeUps.Disable:
		wake = "disabled: the controller-manager will not be woken on edges"
	case o.WakeUps.SyncURL != "":
		wake = "directly at " + o.WakeUps.SyncURL
	}
	shards := o.Management.Shards
	if o.LeaderElection.LeaderElect {
		log.Info("starting; waiting to lead", "shards", shards, "lease", cmp.Or(o.LeaderElection.ResourceName, observer.LeaseName(shards)), "wakeUps", wake)
	} else {
		log.Info("starting", "shards", shards, "wakeUps", wake)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "convoy-observer stopped with an error")
		return 1
	}
	return 0
}
