package scale

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kumodo/convoy-observer/internal/testenv"
)

// TestScaleShape runs the scale benchmark at a small N and asserts its shape, not its
// speed: every Release converges, a steady window has no GET of a target object and no
// write to the management cluster, and each status change reaches its entry and the
// Healthy condition (a bounded wait of a few seconds, not a timing assertion).
func TestScaleShape(t *testing.T) {
	bin := observerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Releases: 6, Objects: 3, Changes: 3, PerNamespace: 3,
		// The window spans a re-check (interval) of every Release: those passes must
		// read from the cache and write nothing.
		Steady: 8 * time.Second, Interval: 5 * time.Second,
		ConvergeTimeout: 2 * time.Minute, ReactionTimeout: 10 * time.Second,
		Binary: bin, Log: os.Stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	if g := rep.TargetGets(); g != 0 {
		t.Errorf("%v GETs of target objects in the steady window, want 0", g)
	}
	if w := rep.ManagementWrites(); w != 0 {
		t.Errorf("%v writes to Releases or inventories in the steady window, want 0", w)
	}
	if rep.SteadyReads["cache"] == 0 {
		t.Errorf("no read from the cache in the steady window (reads: %v): the re-check passes did not run", rep.SteadyReads)
	}
	if n := len(rep.EntryReaction); n != 2*rep.Changes {
		t.Errorf("%d reactions, want %d", n, 2*rep.Changes)
	}
}

// TestFleetShape runs the fleet mode at a small N and asserts its counts, not its speed:
// every Release of C remote Clusters converges with the Clusters spread over two shards
// (one observer each), each Cluster (a user of its own) has its own connection and
// exactly one watch of the workloads (its one namespace) in the observer of its shard, a
// steady window reads nothing from the targets but the caches, and no observer outlives
// the run.
func TestFleetShape(t *testing.T) {
	bin := observerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const clusters = 3
	rep, err := Run(ctx, Config{
		Releases: 6, Objects: 3, Changes: 1, Clusters: clusters, Shards: 2,
		Steady: 6 * time.Second, Interval: 5 * time.Second,
		ConvergeTimeout: 2 * time.Minute, ReactionTimeout: 10 * time.Second,
		Binary: bin, Log: os.Stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	if rep.Namespaces != clusters {
		t.Errorf("%d namespaces, want one per Cluster (%d)", rep.Namespaces, clusters)
	}
	if rep.TargetWatches != clusters {
		t.Errorf("%v open watches of deployments, want %d: one per Cluster, scoped to its namespace", rep.TargetWatches, clusters)
	}
	if rep.Sockets <= clusters {
		t.Errorf("%d sockets, want more than %d: each Cluster's user has a connection of its own", rep.Sockets, clusters)
	}
	if rep.Goroutines == 0 || rep.HeapInuse == 0 {
		t.Errorf("goroutines %d, heap %d: the observer's process metrics were not read", rep.Goroutines, rep.HeapInuse)
	}
	if g := rep.TargetGets(); g != 0 {
		t.Errorf("%v GETs of target objects in the steady window, want 0", g)
	}
	if n := running(t, bin); n != 0 {
		t.Errorf("%d observer processes still running after the run", n)
	}
}

// TestFloorShape runs the floor client (Config.Floor) at a small N: every Release
// converges with the spec's writes only, one apply of the entries and one of the
// condition per Release, and the client does not outlive the run.
func TestFloorShape(t *testing.T) {
	bin := built(t, BuildFloor)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const releases = 6
	rep, err := Run(ctx, Config{Releases: releases, Objects: 3, PerNamespace: 3, Floor: true,
		ConvergeTimeout: 2 * time.Minute, Binary: bin, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	for _, k := range []string{"APPLY releaseinventories", "APPLY releases/status"} {
		if got := rep.ConvergeRequests[k]; got != releases {
			t.Errorf("%s: %v during the converge, want %d (one per Release)", k, got, releases)
		}
	}
	if rep.Syncs != releases {
		t.Errorf("%d sync requests, want %d", rep.Syncs, releases)
	}
	if n := running(t, bin); n != 0 {
		t.Errorf("%d floor clients still running after the run", n)
	}
}

// running counts the processes whose executable is bin.
func running(t *testing.T, bin string) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	n := 0
	for _, d := range dirs {
		if exe, err := os.Readlink(filepath.Join("/proc", d.Name(), "exe")); err == nil && exe == bin {
			n++
		}
	}
	return n
}

// observerBinary builds convoy-observer for a run, or skips the test in -short mode.
func observerBinary(t *testing.T) string { return built(t, Build) }

// built builds a binary of the benchmark with build (Build, BuildFloor), or skips the
// test in -short mode.
func built(t *testing.T, build func(root, dir string) (string, error)) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane and a built binary")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := build(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
