package apiserver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// benchReleases is the fleet of the benchmarks: Releases bench-0000 … in namespace
// benchNS, each with a ReleaseInventory of benchEntries entries.
const (
	benchReleases = 1000
	benchEntries  = 5
	benchNS       = "bench"
)

var fleetOnce sync.Once

// fleet creates the benchmark's Releases and inventories once.
func fleet(b *testing.B) {
	b.Helper()
	var err error
	fleetOnce.Do(func() {
		ctx := context.Background()
		if err = env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}); err != nil {
			return
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for i := range benchReleases {
			g.Go(func() error { return benchRelease(gctx, fmt.Sprintf("bench-%04d", i)) })
		}
		err = g.Wait()
	})
	if err != nil {
		b.Fatal(err)
	}
}

func benchRelease(ctx context.Context, name string) error {
	rel := acv1alpha1.Release(name, benchNS).WithSpec(acv1alpha1.ReleaseSpec().
		WithClusterRef(acv1alpha1.ClusterReference().WithName("target")))
	if err := applyAs(ctx, rel, "convoy-controller-manager"); err != nil {
		return err
	}
	inv := acv1alpha1.ReleaseInventory(name, benchNS)
	for j := range benchEntries {
		inv.WithEntries(acv1alpha1.InventoryEntry().WithGroup("apps").WithKind("Deployment").WithNamespace("demo").
			WithName(fmt.Sprintf("web-%d", j)).WithVersion("v1").WithResource("deployments").WithWave(int32(j % 2)).WithRenderRef("r1"))
	}
	return applyAs(ctx, inv, "convoy-controller-manager")
}

// benchThroughAggregator sends b.N requests through the kube-apiserver (as an admin,
// with no client-side rate limit) from `parallel` goroutines, each for a random Release
// of the fleet, and reports requests per second and the p50 and p99 latency.
func benchThroughAggregator(b *testing.B, parallel int, do func(c *syncapiclient.Client, name string) error) {
	fleet(b)
	// go test prints the test binary's stderr with its stdout: a log line per request
	// would split the result lines. (A benchmark runs alone: no test reads the log.)
	api.Endpoints.Log = logr.Discard()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c := syncapiclient.NewClient(cfg)
	if err := do(c, "bench-0000"); err != nil { // warm the connection and the caches
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	var next sync.Mutex
	i := 0
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, parallel)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				n := i
				i++
				next.Unlock()
				if n >= b.N {
					return
				}
				t0 := time.Now()
				if err := do(c, fmt.Sprintf("bench-%04d", rand.IntN(benchReleases))); err != nil {
					errs <- err
					return
				}
				lat[n] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkHealthThroughAggregator: GET …/health of 1,000 Releases through the
// kube-apiserver, 16 requests at a time (`make bench-api`).
func BenchmarkHealthThroughAggregator(b *testing.B) {
	benchThroughAggregator(b, 16, func(c *syncapiclient.Client, name string) error {
		_, err := c.Health(context.Background(), benchNS, name)
		return err
	})
}

// BenchmarkSyncThroughAggregator: POST …/sync of 1,000 Releases through the
// kube-apiserver, 16 requests at a time: each is one PATCH by convoy-api.
func BenchmarkSyncThroughAggregator(b *testing.B) {
	benchThroughAggregator(b, 16, func(c *syncapiclient.Client, name string) error {
		return c.RequestSync(context.Background(), benchNS, name)
	})
}

// applyAs server-side applies ac as manager.
func applyAs(ctx context.Context, ac runtime.ApplyConfiguration, manager string) error {
	return env.Client.Apply(ctx, ac, client.FieldOwner(manager), client.ForceOwnership)
}
