package healthloop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/prometheus/client_golang/prometheus/testutil"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/controllerkit"
	"github.com/kumodo/convoy-observer/internal/controllerkit/kittest"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// faultyWriter fails the next applies and patches of the given field managers
// (top-level and status applies alike) and passes everything else to the API server.
type faultyWriter struct {
	client.Client
	mu     sync.Mutex
	fails  map[string]int // field manager → failures left
	writes map[string]int // field manager → writes tried
}

func newFaultyWriter(fails map[string]int) *faultyWriter {
	return &faultyWriter{Client: env.Client, fails: fails}
}

func (w *faultyWriter) inject(owner string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writes == nil {
		w.writes = map[string]int{}
	}
	w.writes[owner]++
	if w.fails[owner] > 0 {
		w.fails[owner]--
		return errors.New("injected: etcdserver: request timed out")
	}
	return nil
}

func applyOwner(opts []client.ApplyOption) string {
	o := &client.ApplyOptions{}
	o.ApplyOptions(opts)
	return o.FieldManager
}

func (w *faultyWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := w.inject(applyOwner(opts)); err != nil {
		return err
	}
	return w.Client.Apply(ctx, obj, opts...)
}

func (w *faultyWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	o := &client.PatchOptions{}
	o.ApplyOptions(opts)
	if err := w.inject(o.FieldManager); err != nil {
		return err
	}
	return w.Client.Patch(ctx, obj, patch, opts...)
}

func (w *faultyWriter) Status() client.SubResourceWriter { return faultyStatus{w.Client.Status(), w} }

type faultyStatus struct {
	client.SubResourceWriter
	w *faultyWriter
}

func (s faultyStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	o := &client.SubResourceApplyOptions{}
	o.ApplyOpts(opts)
	if err := s.w.inject(o.FieldManager); err != nil {
		return err
	}
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

// recordingSink is a logr sink that keeps every line, to check what is logged at
// error level.
type recordingSink struct {
	mu     sync.Mutex
	errors []string
	infos  []string
}

func (s *recordingSink) Init(logr.RuntimeInfo)          {}
func (s *recordingSink) Enabled(int) bool               { return true }
func (s *recordingSink) WithValues(...any) logr.LogSink { return s }
func (s *recordingSink) WithName(string) logr.LogSink   { return s }
func (s *recordingSink) Info(_ int, msg string, _ ...any) {
	s.mu.Lock()
	s.infos = append(s.infos, msg)
	s.mu.Unlock()
}
func (s *recordingSink) Error(err error, msg string, _ ...any) {
	s.mu.Lock()
	s.errors = append(s.errors, msg+": "+err.Error())
	s.mu.Unlock()
}
func (s *recordingSink) errorLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errors...)
}
func newRecordingLogger() (logr.Logger, *recordingSink) { s := &recordingSink{}; return logr.New(s), s }

// queueFor runs f's loop in a real controller-runtime controller (the loop's options,
// queue and rate limiter), one pass per Step, so a test sees what the queue does with a
// pass's outcome. The controller and the loop log to the returned sink.
func (f *fixture) queueFor() (*kittest.Loop, *recordingSink) {
	log, sink := newRecordingLogger()
	f.h.Log = log
	return kittest.Start(f.t, f.h.syncHandler, log), sink
}

// TestFailedHookWriteIsRetried: a hooks write that
// fails is retried by the queue with its rate limit, and the hook's state and its sync
// request land on the retry — also for a Release without healthAssessment and without
// syncPolicy.interval, where nothing else would bring the key back.
func TestFailedHookWriteIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.preHook(t0, complete("done")...)
	f.h.Writer = newFaultyWriter(map[string]int{inventory.FieldManagerHookStatus: 1})
	c, _ := f.queueFor()
	c.Enqueue(f.key)
	c.Step(t)
	if n := c.NumRequeues(f.key); n != 1 {
		t.Fatalf("after a failed hooks write the key has %d rate-limited requeues, want 1", n)
	}
	if h := f.hookEntry("pre"); h.State != "" {
		t.Fatalf("hook state %s written by a failed write", h.State)
	}
	c.Step(t) // the rate-limited retry
	f.expectHook("pre", v1alpha1.HookSucceeded, "CompletionsReached: done")
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests after the retry = %d, want 1", n)
	}
	if n := c.NumRequeues(f.key); n != 0 {
		t.Fatalf("a successful retry left %d requeues", n)
	}
}

// TestFailedHookWriteLetsEntriesLand: a hooks write that keeps failing does not hold
// back the entries and the condition of the same pass; the pass still fails (the hook
// state is retried), and the sync request waits until the hook state has landed.
func TestFailedHookWriteLetsEntriesLand(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("true")
	f.preHook(t0.Add(-time.Minute), complete("done")...)
	f.h.Writer = newFaultyWriter(map[string]int{inventory.FieldManagerHookStatus: 3})
	for i := 0; i < 3; i++ {
		if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
			t.Fatal("a failed hooks write did not fail the pass")
		}
		f.expectEntry("a", v1alpha1.StateHealthy, "")
		f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
		if h := f.hookEntry("pre"); h.State != "" {
			t.Fatalf("hook state %s written by a failed write", h.State)
		}
		if n := f.api.syncs.Load(); n != 0 {
			t.Fatalf("%d sync requests before the hook state landed", n)
		}
	}
	f.pass()
	f.expectHook("pre", v1alpha1.HookSucceeded, "CompletionsReached: done")
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests once the hook state landed = %d, want 1", n)
	}
}

// TestRetryDelayIsCapped: however often a pass fails, its retry never waits longer than
// the longest re-check delay (32s), nor than the Release's syncPolicy.interval when that
// is shorter.
func TestRetryDelayIsCapped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		interval, want time.Duration
	}{{0, 32 * time.Second}, {5 * time.Second, 5 * time.Second}, {time.Minute, 32 * time.Second}} {
		f := newFixture(t)
		f.readyRelease(0, c.interval)
		rl := f.h.rateLimiter(controllerkit.NewRateLimiter())
		req := controllerkit.RequestOf(f.key)
		var d time.Duration
		for i := 0; i < 40; i++ {
			if d = rl.When(req); d > c.want {
				t.Fatalf("interval %v: failure %d waits %v, want at most %v", c.interval, i+1, d, c.want)
			}
		}
		if d != c.want {
			t.Fatalf("interval %v: retries saturate at %v, want %v", c.interval, d, c.want)
		}
	}
}

// TestEveryOwnWriteIsRetried: each write of the observer's own fields (hooks, entries,
// Release status, sync request) that fails fails the pass; the retry lands all of them
// and sends the sync request exactly once more.
func TestEveryOwnWriteIsRetried(t *testing.T) {
	t.Parallel()
	for _, write := range []string{inventory.FieldManagerHookStatus, inventory.FieldManagerInventory, inventory.FieldManagerHealth, "sync"} {
		t.Run(write, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.oneConfigMap("true")
			f.preHook(t0.Add(-time.Minute), complete("done")...)
			f.h.Writer = newFaultyWriter(map[string]int{write: 1})
			f.api.fail.Store(write == "sync")
			if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
				t.Fatalf("a failed %s write did not fail the pass", write)
			}
			f.api.fail.Store(false)
			f.pass()
			f.expectHook("pre", v1alpha1.HookSucceeded, "CompletionsReached: done")
			f.expectEntry("a", v1alpha1.StateHealthy, "")
			f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
			if n := f.api.syncs.Load(); n < 1 {
				t.Fatalf("no sync request after the retry of a failed %s write", write)
			}
			syncs, rv := f.api.syncs.Load(), f.getInventory().ResourceVersion
			f.pass()
			if f.api.syncs.Load() != syncs || f.getInventory().ResourceVersion != rv {
				t.Fatal("a steady pass after the retry sent a request or wrote the inventory")
			}
		})
	}
}

// TestHookWriteConflictIsAQuietRetry: a hooks write built from a lagging cache fails its
// resourceVersion precondition; the pass returns the conflict for a rate-limited retry
// (a Release without healthAssessment has no other write to notice it), logs nothing
// at error level and counts it; the retry on fresh data lands the hook and its sync.
func TestHookWriteConflictIsAQuietRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.release(nil, 0)
	f.preHook(t0, complete("done")...)
	stale := f.getInventory()
	// The controller-manager records one more hook: the cache has not seen it yet.
	f.job("other")
	f.hooks(hook{name: "pre", kind: "Job", workload: "migrate", createdAt: t0}, hook{name: "post", kind: "Job", workload: "other", createdAt: t0})
	f.h.Reader = staleReader{Reader: env.Client, stale: stale}
	countConflicts := func() float64 {
		return testutil.ToFloat64(writeConflicts.WithLabelValues("hooks")) + testutil.ToFloat64(writeConflicts.WithLabelValues("sync-owed"))
	}
	conflicts := countConflicts()
	c, sink := f.queueFor()
	c.Enqueue(f.key)
	c.Step(t)
	if n := c.NumRequeues(f.key); n != 1 {
		t.Fatalf("a conflicting hooks write left %d rate-limited requeues, want 1", n)
	}
	if lines := sink.errorLines(); len(lines) != 0 {
		t.Fatalf("an expected conflict was logged at error level: %q", lines)
	}
	if got := countConflicts(); got != conflicts+1 {
		t.Fatalf("write conflicts metric = %v, want %v", got, conflicts+1)
	}
	if f.api.syncs.Load() != 0 {
		t.Fatal("a sync request for a hook state that did not land")
	}
	f.h.Reader = env.Client // the cache caught up
	c.Step(t)
	f.expectHook("pre", v1alpha1.HookSucceeded, "CompletionsReached: done")
	f.expectHook("post", v1alpha1.HookRunning, "")
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests after the retry = %d, want 1", n)
	}
}

// TestHookAndEntryWritesChainResourceVersions: in one pass the hooks write and then the
// entries write land, the second carrying the resourceVersion that the first produced
// (the cache has not seen the first write yet).
func TestHookAndEntryWritesChainResourceVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.oneConfigMap("false")
	f.preHook(t0, complete("done")...)
	// A cache that never sees the observer's writes: each pass starts from this copy.
	f.h.Reader = staleReader{Reader: env.Client, stale: f.getInventory()}
	f.pass()
	f.expectHook("pre", v1alpha1.HookSucceeded, "CompletionsReached: done")
	f.expectEntry("a", v1alpha1.StateProgressing, "ready=false")
}
