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
// keep waiting (a GET each would add to the load of a server too busy to list), here
// through 8 SyncWaits in which the list delivers something every 2, until it ends. A
// list silent for silentLimit SyncWaits is given up (the read then GETs), even though
// the server answers: a hung list must not hold the workers.
func TestReadsWaitForTheListOfABusyServer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var probes atomic.Int32
	w := busyWatches(clk, func() error { probes.Add(1); return nil })
	inf := &syncAfter{}
	s := &scopeInformer{informer: inf, clock: clk}
	s.touch()
	const reads = 50
	done := make(chan error, reads)
	var started sync.WaitGroup
	for range reads {
		started.Go(func() { done <- w.waitSynced(context.Background(), s) })
	}
	for i := range 800 {
		clk.Step(10 * time.Millisecond)
		time.Sleep(50 * time.Microsecond)
		if i%200 == 199 {
			s.touch()
		}
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
	if probes.Load() == 0 {
		t.Fatal("no probe while the list was silent for more than SyncWait")
	}

	if waited, err := waitOnASilentList(w, clk); !errors.Is(err, errStalled) {
		t.Fatalf("a read of a list silent on a server that answers: %v, want %v", err, errStalled)
	} else if waited < silentLimit*time.Second || waited > (silentLimit+1)*time.Second {
		t.Fatalf("gave up on a silent list after %v, want silentLimit SyncWaits (%ds)", waited, silentLimit)
	}
}

// TestOneProbeForManyReads: the reads that wait on one cluster share one probe however
// many they are, and one whose context ends stops waiting for it.
func TestOneProbeForManyReads(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var probes atomic.Int32
	entered, release := make(chan struct{}, 100), make(chan struct{})
	w := busyWatches(clk, func() error {
		probes.Add(1)
		entered <- struct{}{}
		<-release
		return nil
	})
	const reads = 50
	done := make(chan error, reads)
	for range reads {
		go func() { done <- w.direct.answers(context.Background()) }()
	}
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- w.direct.answers(ctx) }()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a read whose context ended while the probe ran: %v, want context.Canceled", err)
	}
	time.Sleep(50 * time.Millisecond) // the other reads join the running probe
	close(release)
	for range reads {
		if err := <-done; err != nil {
			t.Fatalf("a read sharing the probe: %v", err)
		}
	}
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d probes for %d reads at once, want 1", n, reads)
	}
	if err := w.direct.answers(context.Background()); err != nil || probes.Load() != 1 {
		t.Fatalf("a read within SyncWait of the answer: %v after %d probes, want no new probe", err, probes.Load())
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
	for range 200 {
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
	if err := r.answers(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	_, _ = r.Get(context.Background(), gvrConfigMaps, "default", "none")
	if plain.Load() != 1 || impersonated.Load() != 0 || reads.Load() != 1 {
		t.Fatalf("probes as the observer %d, as the ServiceAccount %d, impersonated reads %d; want 1, 0, 1",
			plain.Load(), impersonated.Load(), reads.Load())
	}
}

// TestNoHoldDownWhenTheReadGaveUp: a read that timed out and whose context ends while
// the probe runs gives no verdict on the server: the cluster is not held down.
func TestNoHoldDownWhenTheReadGaveUp(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	entered, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	w := busyWatches(clk, func() error { entered <- struct{}{}; <-release; return timeoutErr })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.direct.notAnswered(ctx, timeoutErr) }()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, ErrClusterNotConnected) {
		t.Fatalf("a read that gave up during the probe: %v, want ErrClusterNotConnected", err)
	}
	if err := w.direct.heldDown(); err != nil {
		t.Fatalf("held down by a read that gave up: %v", err)
	}
}
