package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/spf13/pflag"
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
// internal/syncapi/apiserver plus --v. The error is pflag.ErrHelp for -h, else a
// usage error that the flag set has not printed yet.
func parseOptions(args []string, stderr io.Writer) (*apiserver.Options, int, error) {
	o := apiserver.NewOptions()
	verbosity := 0
	fs := pflag.NewFlagSet("convoy-api", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o.AddFlags(fs)
	showVersion := fs.Bool("version", false, "print the version, the commit and its date, and exit")
	fs.IntVarP(&verbosity, "v", "v", 0, "log verbosity (1 also logs the probes, 3 every request of the generic server)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: convoy-api [--kubeconfig F] [--secure-port N] [--tls-cert-file F --tls-private-key-file F] [--authentication-kubeconfig F] [--authorization-kubeconfig F] [--v N] ...\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, 0, err
	}
	if *showVersion {
		return nil, 0, errVersion
	}
	if fs.NArg() > 0 {
		return nil, 0, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := o.Validate(); err != nil {
		return nil, 0, err
	}
	return o, verbosity, nil
}

// run parses args, serves until ctx is done and then shuts down gracefully, and returns
// the exit status. ready, when not nil, receives the address once the server is built
// (it listens from then on).
func run(ctx context.Context, args []string, stderr io.Writer, ready func(net.Addr)) int {
	o, verbosity, err := parseOptions(args, stderr)
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
	if err := setVerbosity(verbosity); err != nil {
		fmt.Fprintf(stderr, "convoy-api: %v\n", err)
		return exitUsage
	}
	ctrllog.SetLogger(klog.Background()) // the informer cache logs through controller-runtime
	if err := serve(ctx, o, ready); err != nil {
		klog.ErrorS(err, "convoy-api failed")
		klog.Flush()
		return exitError
	}
	klog.Flush()
	return exitOK
}

// setVerbosity sets klog's -v without exposing klog's other flags.
func setVerbosity(v int) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs.Set("v", strconv.Itoa(v))
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
