package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/subresources"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// shutdownTimeout bounds how long a graceful shutdown waits for requests in flight.
const shutdownTimeout = 10 * time.Second

// userAgent names convoy-api in the API server's audit log.
const userAgent = "convoy-api"

// options are the command-line flags.
type options struct {
	kubeconfig  string
	bindAddress string
	tlsCertFile string
	tlsKeyFile  string
	verbosity   int
}

// parseOptions parses args (without the program name). The error is flag.ErrHelp for
// -h, else a usage error that the flag set has not printed yet.
func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("convoy-api", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster that holds the Releases (default: the in-cluster config)")
	fs.StringVar(&o.bindAddress, "bind-address", ":8090", "HOST:PORT to serve on")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM certificate (chain) to serve HTTPS with; needs --tls-private-key-file")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity (1 also logs /healthz probes)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: convoy-api [--kubeconfig F] [--bind-address HOST:PORT] [--tls-cert-file F --tls-private-key-file F] [--v N]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err // the flag set printed the problem and the usage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		return nil, errors.New("--tls-cert-file and --tls-private-key-file must be given together")
	}
	if _, _, err := net.SplitHostPort(o.bindAddress); err != nil {
		return nil, fmt.Errorf("invalid --bind-address %q: %w", o.bindAddress, err)
	}
	return o, nil
}

// loadConfig reads the kubeconfig file when one is given, else the in-cluster config
// (CONTRACT §2: no other fallback, so a missing flag never silently picks up a
// developer's ~/.kube/config).
func loadConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and no in-cluster config: %w", err)
	}
	return cfg, nil
}

// newClient returns a direct (uncached) client for Releases and ReleaseInventories: each
// request reads the current objects, managedFields included.
func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	return client.New(cfg, client.Options{Scheme: scheme})
}

// run parses args, serves until ctx is done and then shuts down gracefully, and returns
// the exit status. ready, when not nil, receives the address once it listens.
func run(ctx context.Context, args []string, stderr io.Writer, ready func(net.Addr)) int {
	o, err := parseOptions(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "convoy-api: %v\nRun 'convoy-api -h' for usage.\n", err)
		return exitUsage
	}
	if err := setVerbosity(o.verbosity); err != nil {
		fmt.Fprintf(stderr, "convoy-api: %v\n", err)
		return exitUsage
	}
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

// serve builds the client and the server and serves until ctx is done.
func serve(ctx context.Context, o *options, ready func(net.Addr)) error {
	cfg, err := loadConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	c, err := newClient(cfg)
	if err != nil {
		return fmt.Errorf("building the client for %s: %w", cfg.Host, err)
	}
	srv := &http.Server{
		Handler:           subresources.NewHandler(c),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if o.tlsCertFile != "" {
		// Load now so that a bad pair fails the start, not every handshake.
		cert, err := tls.LoadX509KeyPair(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return fmt.Errorf("loading --tls-cert-file %s and --tls-private-key-file %s: %w", o.tlsCertFile, o.tlsKeyFile, err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", o.bindAddress)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.bindAddress, err)
	}
	scheme := "http"
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
		scheme = "https"
	}
	klog.InfoS("serving", "address", ln.Addr().String(), "scheme", scheme, "apiServer", cfg.Host)
	if ready != nil {
		ready(ln.Addr())
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving on %s: %w", o.bindAddress, err)
	case <-ctx.Done():
	}
	klog.InfoS("shutting down", "timeout", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
