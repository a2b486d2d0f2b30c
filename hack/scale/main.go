// Command scale is `make bench-scale`: the scale benchmark of test/scale for each N of
// --releases (and each rule selection of --rules), one fresh control plane per run,
// printing one table per run and, with two selections, their converge times side by
// side (see docs/operations.md, "Scaling and sizing").
//
//	go run ./hack/scale --releases 10,100,1000 --objects 10 --changes 50
//	go run ./hack/scale --releases 1000 --rules defaults,library
//	go run ./hack/scale --releases 10000 --clusters 1,50,200   # the fleet mode
//	go run ./hack/scale --releases 1000,10000 --floor 3         # against the floor client
//	go run ./hack/scale --releases 10000 --clusters 50 --shards 2 # two shards on one fleet
package main

import (
	"cmp"
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
		perNS    = flag.Int("per-namespace", 100, "Releases per namespace (and Cluster); with --clusters, N / C")
		clusters = flag.String("clusters", "0", "comma-separated C of the fleet mode, each run for every N: C remote Clusters, "+
			"one per namespace, each with its own kubeconfig Secret and user (0: every Release's Cluster is the management cluster)")
		steady   = flag.Duration("steady", time.Minute, "length of the steady window")
		interval = flag.Duration("interval", 30*time.Second, "syncPolicy.interval of every Release")
		timeout  = flag.Duration("converge-timeout", 15*time.Minute, "give up a converge after this long")
		shards   = flag.Int("shards", 1, "K > 1: K observers, one per shard, the fleet's Clusters spread over them (with --clusters); figures are their sums")
		binary   = flag.String("observer-binary", "", "a built convoy-observer to measure instead of this tree's (e.g. an earlier commit's, for a before/after)")
		args     = flag.String("observer-args", "", "extra flags of convoy-observer, space-separated (e.g. \"--target-direct-reads\")")
		floor    = flag.Int("floor", 0, "P > 0: for each N, P pairs of runs of the floor client (test/scale/floorclient: the spec's writes only) "+
			"and convoy-observer (the floor client first in odd pairs, the observer in even ones), each pair printing the converge and CPU ratios (observer / floor); without --clusters")
		cpuProfile = flag.Duration("cpu-profile", 0, "> 0: a CPU profile of the observer (and of the floor client) over this first part of the converge, "+
			"written next to its log in the temporary directory, and its heap profile once converged (alloc_space: every allocation until then)")
		rules = flag.String("rules", scale.RulesDefaults, "comma-separated rule selections, each run for every N: "+
			scale.RulesDefaults+" (convoy-defaults) or "+scale.RulesLibrary+" (convoy-defaults, the whole rule library and the generic set)")
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
	binDir = dir
	bin := *binary
	if bin == "" {
		if bin, err = scale.Build(root, dir); err != nil {
			fail(err)
		}
	}
	floorBin := ""
	if *floor > 0 {
		if floorBin, err = scale.BuildFloor(root, dir); err != nil {
			fail(err)
		}
	}
	var ns []int
	for _, s := range strings.Split(*releases, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fail(fmt.Errorf("--releases: %q is not a positive number", s))
		}
		ns = append(ns, n)
	}
	var fleets []int
	for _, s := range strings.Split(*clusters, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 0 {
			fail(fmt.Errorf("--clusters: %q is not a number ≥ 0", s))
		}
		fleets = append(fleets, c)
	}
	var selections []string
	for _, s := range strings.Split(*rules, ",") {
		s = strings.TrimSpace(s)
		if s != scale.RulesDefaults && s != scale.RulesLibrary {
			fail(fmt.Errorf("--rules: %q is neither %s nor %s", s, scale.RulesDefaults, scale.RulesLibrary))
		}
		selections = append(selections, s)
	}
	if *floor > 0 {
		if len(fleets) > 1 || fleets[0] != 0 || len(selections) > 1 {
			fail(fmt.Errorf("--floor compares one selection on the management cluster: no --clusters, one --rules"))
		}
		exit(floorPairs(ctx, ns, *floor, func(n int, useFloor bool) scale.Config {
			cfg := scale.Config{Releases: n, Objects: *objects, Changes: *changes, PerNamespace: *perNS,
				Steady: time.Second, Interval: *interval, ConvergeTimeout: *timeout, Rules: selections[0],
				Binary: bin, Args: strings.Fields(*args), Log: os.Stderr, CPUProfile: *cpuProfile}
			if useFloor {
				cfg.Binary, cfg.Args, cfg.Floor, cfg.Changes = floorBin, nil, true, 0
			} else {
				cfg.Changes = 0
			}
			return cfg
		}))
	}
	status := 0
	var summary []string
runs:
	for _, n := range ns {
		var converged []*scale.Report
		for _, c := range fleets {
			for _, sel := range selections {
				rep, err := scale.Run(ctx, scale.Config{
					Releases: n, Objects: *objects, Changes: *changes, PerNamespace: *perNS, Clusters: c,
					Steady: *steady, Interval: *interval, ConvergeTimeout: *timeout, Rules: sel,
					Binary: bin, Args: strings.Fields(*args), Log: os.Stderr, Shards: *shards, CPUProfile: *cpuProfile,
				})
				if rep != nil && rep.Converge > 0 {
					fmt.Println(rep.Table())
					converged = append(converged, rep)
					if len(fleets) > 1 {
						summary = append(summary, fleetLine(rep))
					}
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "bench-scale N=%d C=%d rules %s: %v\n", n, c, sel, err)
					status = 1
				}
				if ctx.Err() != nil {
					break runs
				}
			}
		}
		if len(fleets) > 1 {
			continue // the fleet lines compare the runs
		}
		if len(selections) > 1 && len(converged) == len(selections) {
			line := fmt.Sprintf("N = %d, cold converge:", n)
			for _, rep := range converged {
				line += fmt.Sprintf(" %s %s (observer CPU %s);", rep.Rules, rep.Converge.Round(10*time.Millisecond),
					rep.CPUConverge.Round(10*time.Millisecond))
			}
			base := converged[0].Converge
			for _, rep := range converged[1:] {
				line += fmt.Sprintf(" %s / %s = %.2f", rep.Rules, converged[0].Rules, float64(rep.Converge)/float64(base))
			}
			summary = append(summary, line)
		}
	}
	if len(fleets) > 1 && len(summary) > 0 {
		fmt.Println("| N | C | converge | observer CPU | RSS | live heap per object | RSS per Cluster | goroutines per Cluster | watches per Cluster |")
		fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	}
	for _, line := range summary {
		fmt.Println(line)
	}
	exit(status)
}

// fleetLine is one run of the fleet comparison: | N | C | converge | CPU | RSS | heap per
// object (the live heap after a GC when measured) | per Cluster: RSS, goroutines, watches |.
func fleetLine(r *scale.Report) string {
	perObj := 0.0
	if r.Objects > 0 {
		perObj = float64(cmp.Or(r.HeapLive, r.HeapInuse)) / float64(r.Objects)
	}
	return fmt.Sprintf("| %d | %d | %s | %s | %.0f MiB | %.0f B | %.0f KiB | %.1f | %.1f |", r.Releases, r.Clusters,
		r.Converge.Round(10*time.Millisecond), r.CPUConverge.Round(10*time.Millisecond), float64(r.RSSConverged)/(1<<20), perObj,
		r.PerCluster(float64(r.RSSConverged))/(1<<10), r.PerCluster(float64(r.Goroutines)), r.PerCluster(r.TargetWatches))
}

// floorPairs runs, for each N, p pairs and prints each pair's ratios, then returns the
// exit status. Odd pairs run the floor client first, even pairs the observer first, so
// that a machine that drifts faster or slower over the runs does not favour one side.
func floorPairs(ctx context.Context, ns []int, p int, config func(n int, floor bool) scale.Config) int {
	status := 0
	var summary []string
	for _, n := range ns {
		for k := 1; k <= p && ctx.Err() == nil; k++ {
			var pair [2]*scale.Report // the floor client's, the observer's
			order := []bool{true, false}
			if k%2 == 0 {
				order = []bool{false, true}
			}
			for _, useFloor := range order {
				rep, err := scale.Run(ctx, config(n, useFloor))
				if err != nil {
					fmt.Fprintf(os.Stderr, "bench-scale N=%d floor=%v: %v\n", n, useFloor, err)
					status = 1
					break
				}
				fmt.Println(rep.Table())
				if useFloor {
					pair[0] = rep
				} else {
					pair[1] = rep
				}
			}
			if pair[0] == nil || pair[1] == nil {
				continue
			}
			f, o := pair[0], pair[1]
			summary = append(summary, fmt.Sprintf("| %d | %d | %s | %s | %.2f | %s / %s | %s / %s | %.2f | %.0f / %.0f |", n, k,
				f.Converge.Round(10*time.Millisecond), o.Converge.Round(10*time.Millisecond), float64(o.Converge)/float64(f.Converge),
				f.CPUConverge.Round(10*time.Millisecond), o.CPUConverge.Round(10*time.Millisecond),
				f.APIServerCPUConverge.Round(10*time.Millisecond), o.APIServerCPUConverge.Round(10*time.Millisecond),
				float64(o.APIServerCPUConverge)/float64(f.APIServerCPUConverge), f.WatchesEnded(), o.WatchesEnded()))
		}
	}
	fmt.Println("| N | pair | floor converge | observer converge | ratio | client CPU floor / observer | kube-apiserver CPU floor / observer | ratio | watches ended (slow client) floor / observer |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, line := range summary {
		fmt.Println(line)
	}
	return status
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-scale:", err)
	exit(2)
}

// binDir holds the binaries that the benchmark built; exit removes it (os.Exit runs no
// deferred call).
var binDir string

func exit(code int) {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}
