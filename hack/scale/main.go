// Command scale is `make bench-scale`: the scale benchmark of test/scale for each N of
// --releases, one fresh control plane per N, printing one table per N (see
// docs/operations.md, "Scaling and sizing").
//
//	go run ./hack/scale --releases 10,100,1000 --objects 10 --changes 50
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kumodo/convoy-observer/internal/testenv"
	"github.com/kumodo/convoy-observer/test/scale"
)

func main() {
	var (
		releases = flag.String("releases", "10,100,1000", "comma-separated N: Releases per run")
		objects  = flag.Int("objects", 10, "M: Deployments per Release")
		changes  = flag.Int("changes", 50, "K: status changes measured per run (each one to unhealthy and back)")
		perNS    = flag.Int("per-namespace", 100, "Releases per namespace (and Cluster)")
		steady   = flag.Duration("steady", time.Minute, "length of the steady window")
		interval = flag.Duration("interval", 30*time.Second, "syncPolicy.interval of every Release")
		timeout  = flag.Duration("converge-timeout", 15*time.Minute, "give up a converge after this long")
		args     = flag.String("observer-args", "", "extra flags of convoy-observer, space-separated (e.g. \"--target-direct-reads\")")
	)
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // the benchmark's own cache logs nothing worth reading
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := testenv.RepoRoot()
	if err != nil {
		fail(err)
	}
	dir, err := os.MkdirTemp("", "bench-scale-bin-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	bin, err := scale.Build(root, dir)
	if err != nil {
		fail(err)
	}
	status := 0
	for _, s := range strings.Split(*releases, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fail(fmt.Errorf("--releases: %q is not a positive number", s))
		}
		rep, err := scale.Run(ctx, scale.Config{
			Releases: n, Objects: *objects, Changes: *changes, PerNamespace: *perNS,
			Steady: *steady, Interval: *interval, ConvergeTimeout: *timeout,
			Binary: bin, Args: strings.Fields(*args), Log: os.Stderr,
		})
		if rep != nil && rep.Converge > 0 {
			fmt.Println(rep.Table())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-scale N=%d: %v\n", n, err)
			status = 1
		}
		if ctx.Err() != nil {
			break
		}
	}
	os.Exit(status)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-scale:", err)
	os.Exit(2)
}
