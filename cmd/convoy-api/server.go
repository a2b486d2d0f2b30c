package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kumodo/convoy-observer/internal/syncapi/apiserver"
	"github.com/kumodo/convoy-observer/internal/version"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// errVersion is parseOptions' answer to --version.
var errVersion = errors.New("version requested")

// parseOptions parses args (without the program name) into the options of
// internal/syncapi/apiserver and component-base's logging configuration. The error is
// pflag.ErrHelp for -h, else a usage error that the flag set has not printed yet.
func parseOptions(args []string, stderr io.Writer) (*apiserver.Options, *logsapi.LoggingConfiguration, error) {
	o := apiserver.NewOptions()
	logging := logsapi.NewLoggingConfiguration()
	fss := cliflag.NamedFlagSets{}
	o.AddFlags(&fss)
	logsapi.AddFlags(logging, fss.FlagSet("logging"))
	showVersion := fss.FlagSet("generic").Bool("version", false, "print the version, the commit and its date, and exit")
	fs := pflag.NewFlagSet("convoy-api", pflag.ContinueOnError)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: convoy-api [flags]\n")
		cliflag.PrintSections(stderr, fss, 0)
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if *showVersion {
		return nil, nil, errVersion
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	return o, logging, nil
}

// run parses args, serves until ctx is done and then shuts down gracefully, and returns
// the exit status. ready, when not nil, receives the address once the server is built
// (it listens from then on).
func run(ctx context.Context, args []string, stderr io.Writer, ready func(net.Addr)) int {
	o, logging, err := parseOptions(args, stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return exitOK
	case errors.Is(err, errVersion):
		fmt.Fprint(os.Stdout, version.Line("convoy-api"))
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "convoy-api: %v\nRun 'convoy-api -h' for usage.\n", err)
		return exitUsage
	}
	// component-base's logger (klog's; text unless --logging-format=json) is the one of
	// k8s.io/apiserver, of client-go and, through klog, of controller-runtime's cache.
	if err := applyLogging(logging); err != nil {
		fmt.Fprintf(stderr, "convoy-api: %v\n", err)
		return exitUsage
	}
	ctrllog.SetLogger(klog.Background())
	if err := serve(ctx, o, ready); err != nil {
		klog.ErrorS(err, "convoy-api failed")
		klog.Flush()
		return exitError
	}
	klog.Flush()
	return exitOK
}

// applyLogging validates and applies the logging configuration (once per process;
// the tests, which run the command many times in one, let an unchanged one be reapplied).
func applyLogging(c *logsapi.LoggingConfiguration) error {
	return logsapi.ValidateAndApply(c, nil)
}

// serve builds the server and serves until ctx is done.
func serve(ctx context.Context, o *apiserver.Options, ready func(net.Addr)) error {
	if err := o.Complete(); err != nil {
		return err
	}
	s, err := apiserver.New(o)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(s.Addr())
	}
	return s.Run(ctx)
}
