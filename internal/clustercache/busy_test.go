package clustercache

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// busyWatches is a targetWatches whose reader probes with probe, on a fake clock, with
// SyncWait 1s.
func busyWatches(clk *clocktesting.FakeClock, probe func() error) *targetWatches {
	return &targetWatches{cluster: "ns/busy", opts: &Options{SyncWait: time.Second, Clock: clk},
		direct: &dynamicReader{cluster: "ns/busy", clock: clk, holdDown: 15 * time.Second,
			probe: probe, answerFresh: time.Second}}
}

// timeoutErr is what client-go returns for a request that got no answer in time.
var timeoutErr = &url.Error{Op: "Get", URL: "https://target/version", Err: context.DeadlineExceeded}

// TestReadsWaitForTheListOfABusyServer: a first list that delivers nothing for SyncWait
// on a server that still answers /version is slow, not dead. The reads that wait for it
// keep waiting (a GET each would add to the load of a server too busy to list), and
// they share one probe per SyncWait however many they are.
func TestReadsWaitForTheListOfABusyServer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var probes atomic.Int32
	w := busyWatches(clk, func() error { probes.Add(1); return nil })
	inf := &syncAfter{}
	s := &scopeInformer{informer: inf, clock: clk}
	s.touch()
	start := clk.Now()
	const reads = 50
	done := make(chan error, reads)
	var started sync.WaitGroup
	for range reads {
		started.Go(func() { done <- w.waitSynced(context.Background(), s) })
	}
	// Nothing arrives for 8 SyncWaits (well within syncWaitLimit); then the list ends.
	for range 800 {
		clk.Step(10 * time.Millisecond)
		time.Sleep(50 * time.Microsecond)
	}
	select {
	case err := <-done:
		t.Fatalf("a read gave up on the slow list of a server that answers: %v", err)
	default:
	}
	inf.synced.Store(true)
	for range reads {
		if err := stepUntil(clk, done); err != nil {
			t.Fatalf("a read of a busy server's list: %v, want to wait until it synced", err)
		}
	}
	started.Wait()
	// One per SyncWait of the fake time that passed (the reads see the sync a few steps
	// late), not one per read.
	if n, most := probes.Load(), int32(clk.Since(start)/time.Second)+1; n == 0 || n > most {
		t.Fatalf("%d probes for %d reads over %v, want one per SyncWait (1s) at most", n, reads, clk.Since(start))
	}
}

// TestReadsOfASilentServerHoldItDown: when the list delivered nothing for SyncWait and
// the server does not answer /version either, the read fails as not connected, and the
// cluster is held down (later reads fail at once, without waiting or probing). A probe
// answered with an error status is an answer: the read waits on.
func TestReadsOfASilentServerHoldItDown(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var probes atomic.Int32
	w := busyWatches(clk, func() error { probes.Add(1); return timeoutErr })
	s := &scopeInformer{informer: &syncAfter{}, clock: clk}
	s.touch()
	done := make(chan error, 1)
	go func() { done <- w.waitSynced(context.Background(), s) }()
	if err := stepUntil(clk, done); !errors.Is(err, ErrClusterNotConnected) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read of a silent server: %v, want ErrClusterNotConnected with the probe's timeout", err)
	}
	if w.direct.heldDown() == nil {
		t.Fatal("the silent server is not held down")
	}
	before := probes.Load()
	go func() { done <- w.waitSynced(context.Background(), s) }()
	if err := stepUntil(clk, done); !errors.Is(err, ErrClusterNotConnected) || probes.Load() != before {
		t.Fatalf("a read while held down: %v after %d more probes, want the hold-down at once", err, probes.Load()-before)
	}

	forbidden := busyWatches(clk, func() error {
		return apierrors.NewForbidden(schema.GroupResource{}, "/version", errors.New("no"))
	})
	inf := &syncAfter{}
	s = &scopeInformer{informer: inf, clock: clk}
	s.touch()
	go func() { done <- forbidden.waitSynced(context.Background(), s) }()
	for range 300 {
		clk.Step(10 * time.Millisecond)
		time.Sleep(50 * time.Microsecond)
	}
	inf.synced.Store(true)
	if err := stepUntil(clk, done); err != nil {
		t.Fatalf("a read of a server that answers /version with 403: %v, want to wait for the list", err)
	}
}

// TestProbeGoesAsTheObserver: the /version probe of a Cluster read as a ServiceAccount
// goes as the observer itself: whether the server answers is no read of the tenant's,
// and in the ServiceAccount's flow of the server's priority and fairness it would wait
// behind that identity's own lists (a busy server would look dead). Its reads stay
// impersonated.
func TestProbeGoesAsTheObserver(t *testing.T) {
	var impersonated, plain, reads atomic.Int32
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			switch {
			case r.URL.Path != "/version":
				if r.Header.Get("Impersonate-User") != "" {
					reads.Add(1)
				}
			case r.Header.Get("Impersonate-User") != "":
				impersonated.Add(1)
			default:
				plain.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	cache := New(Options{Local: cfg, DefaultServiceAccount: "reader"})
	defer cache.Stop()
	reader, err := cache.GetReader(context.Background(), localCluster("probe"))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := reader.(*dynamicReader)
	if !ok || r.identity != "system:serviceaccount:ns:reader" {
		t.Fatalf("reader %T of identity %q, want a dynamicReader as the ServiceAccount", reader, r.identity)
	}
	if err := r.answers(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	_, _ = r.Get(context.Background(), gvrConfigMaps, "default", "none")
	if plain.Load() != 1 || impersonated.Load() != 0 || reads.Load() != 1 {
		t.Fatalf("probes as the observer %d, as the ServiceAccount %d, impersonated reads %d; want 1, 0, 1",
			plain.Load(), impersonated.Load(), reads.Load())
	}
}
