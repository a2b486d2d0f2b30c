// Command convoy-observer runs the observer loops of convoy (today the health loop,
// docs/design.md) in one controller-runtime manager, with leader election per
// shard, metrics and health probes. Logs go to stderr; --version prints the version,
// the commit and its date to stdout.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kumodo/convoy-observer/internal/observer"
	"github.com/kumodo/convoy-observer/internal/version"
)

func main() {
	var flags observer.Flags
	fs := pflag.CommandLine
	flags.BindFlags(fs)
	showVer := fs.Bool("version", false, "print the version, the commit and its date, and exit")
	// Errors say why in their message; a stack trace only for a programming error.
	zopts := zap.Options{StacktraceLevel: zapcore.DPanicLevel}
	zopts.BindFlags(flag.CommandLine)
	fs.AddGoFlagSet(flag.CommandLine) // the zap flags and controller-runtime's --kubeconfig
	pflag.Parse()
	if *showVer {
		fmt.Print(version.Line("convoy-observer"))
		return
	}
	setupLogging(&zopts, os.Stderr)
	log := ctrl.Log.WithName("setup")
	o, err := flags.Options()
	if err != nil {
		log.Error(nil, err.Error())
		os.Exit(2)
	}
	noSync := flags.WakeUps.Disable

	ctx := ctrl.SetupSignalHandler()
	if o.LeaderElect && o.LeaderElectionNamespace == "" {
		if _, err := rest.InClusterConfig(); err != nil {
			log.Error(nil, "--leader-elect outside a cluster needs --leader-election-namespace (the namespace of the Lease)")
			os.Exit(2)
		}
	}
	cfg, err := loadConfig()
	if err != nil {
		log.Error(err, "loading the kubeconfig")
		os.Exit(1)
	}
	mgr, err := observer.New(ctx, cfg, o)
	if err != nil {
		log.Error(err, "setting up convoy-observer")
		os.Exit(1)
	}
	wake := "through the kube-apiserver " + cfg.Host
	switch {
	case noSync:
		wake = "disabled: the controller-manager will not be woken on edges"
	case o.SyncURL != "":
		wake = "directly at " + o.SyncURL
	}
	if o.LeaderElect {
		log.Info("starting; waiting to lead", "shards", o.Shards, "lease", observer.LeaseName(o.Shards), "wakeUps", wake)
	} else {
		log.Info("starting", "shards", o.Shards, "wakeUps", wake)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "convoy-observer stopped with an error")
		os.Exit(1)
	}
}

// loadConfig reads --kubeconfig, or, without it, the in-cluster config (both
// binaries fall back to it when --kubeconfig is absent), the
// same way as convoy-api: $KUBECONFIG and ~/.kube/config are not consulted.
func loadConfig() (*rest.Config, error) {
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		return ctrl.GetConfig()
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
	}
	return cfg, nil
}

// setupLogging makes the JSON logger of opts, writing to w, the logger of
// controller-runtime and of klog, so client-go's own lines (a reflector's watch
// warnings, a throttled request) are JSON lines among the observer's, not plain text.
func setupLogging(opts *zap.Options, w io.Writer) {
	logger := zap.New(zap.UseFlagOptions(opts), zap.WriteTo(w))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
}
