package controllerkit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kumodo/convoy-observer/internal/controllerkit"
	"github.com/kumodo/convoy-observer/internal/controllerkit/kittest"
)

var app1 = controllerkit.RequestOf("demo/app1")

// TestRateLimiterSaturates: 5ms doubling to 32s, the longest re-check delay: the 13th
// failure waits 20.48s and every later one 32s, never 0 or negative; Forget starts over.
func TestRateLimiterSaturates(t *testing.T) {
	t.Parallel()
	rl := controllerkit.NewRateLimiter()
	for i := 1; i <= 100; i++ {
		d := rl.When(app1)
		switch {
		case i == 1 && d != 5*time.Millisecond:
			t.Fatalf("failure 1 waits %v", d)
		case i == 13 && d != 20*time.Second+480*time.Millisecond:
			t.Fatalf("failure 13 waits %v", d)
		case i > 13 && d != 32*time.Second:
			t.Fatalf("failure %d waits %v, want 32s", i, d)
		case d <= 0:
			t.Fatalf("failure %d waits %v", i, d)
		}
	}
	rl.Forget(app1)
	if d := rl.When(app1); d != 5*time.Millisecond {
		t.Fatalf("after Forget: %v", d)
	}
}

// TestWithMaxDelay: a per-item cap shortens that item's delays only, and 0 keeps the
// limiter's own.
func TestWithMaxDelay(t *testing.T) {
	t.Parallel()
	other := controllerkit.RequestOf("demo/other")
	rl := controllerkit.WithMaxDelay(controllerkit.NewRateLimiter(), func(r reconcile.Request) time.Duration {
		if r == app1 {
			return 3 * time.Second
		}
		return 0
	})
	var a, o time.Duration
	for i := 0; i < 30; i++ {
		a, o = rl.When(app1), rl.When(other)
		if a > 3*time.Second || o > controllerkit.RetryMaxDelay {
			t.Fatalf("failure %d waits %v and %v", i+1, a, o)
		}
	}
	if a != 3*time.Second || o != controllerkit.RetryMaxDelay {
		t.Fatalf("saturated at %v and %v, want 3s and %v", a, o, controllerkit.RetryMaxDelay)
	}
	if rl.Forget(app1); rl.When(app1) != 5*time.Millisecond {
		t.Fatal("Forget did not reach the inner limiter")
	}
}

// TestScheduledRecheckForgets: a pass that schedules a re-check clears the failure
// count, so the next error retries from the base delay (shared/cases 24).
func TestScheduledRecheckForgets(t *testing.T) {
	t.Parallel()
	loop := kittest.Start(t, func(context.Context, string) (controllerkit.Result, error) {
		return controllerkit.Result{RequeueAfter: time.Hour}, nil
	}, logr.Discard())
	for i := 0; i < 19; i++ { // 19 earlier failures
		loop.Limiter().When(app1)
	}
	loop.Enqueue("demo/app1")
	if out := loop.Step(t); out.Err != nil || out.Result.RequeueAfter != time.Hour {
		t.Fatalf("pass = %+v", out)
	}
	if adds := loop.Adds("demo/app1"); adds[len(adds)-1].After != time.Hour {
		t.Fatalf("the re-check was not scheduled an hour out: %+v", adds)
	}
	if d := loop.Limiter().When(app1); d != 5*time.Millisecond {
		t.Fatalf("the first error after a scheduled re-check waits %v, want 5ms", d)
	}
}

// TestLoopsHaveTheirOwnLimiter: a success in one loop never resets the backoff of the
// same key in another (shared/cases 26): each controller's options carry a limiter of
// their own.
func TestLoopsHaveTheirOwnLimiter(t *testing.T) {
	t.Parallel()
	a, b := controllerkit.ControllerOptions(1).RateLimiter, controllerkit.ControllerOptions(1).RateLimiter
	for i := 0; i < 3; i++ {
		a.When(app1)
	}
	b.Forget(app1) // a success in b
	if d := a.When(app1); d != 40*time.Millisecond {
		t.Fatalf("a's 4th failure waits %v after b's success, want 40ms", d)
	}
}

// TestPanicIsAnError: a panicking pass is retried with the rate limiter and the worker
// survives.
func TestPanicIsAnError(t *testing.T) {
	t.Parallel()
	calls := 0
	loop := kittest.Start(t, func(context.Context, string) (controllerkit.Result, error) {
		calls++
		if calls == 1 {
			var m map[string]int
			m["boom"]++ //nolint:staticcheck // SA5000: the nil map write is the panic under test
		}
		return controllerkit.Result{}, nil
	}, logr.Discard())
	loop.Enqueue("demo/app1")
	if out := loop.Step(t); !out.Panicked {
		t.Fatalf("pass = %+v, want a panic", out)
	}
	if n := loop.NumRequeues("demo/app1"); n != 1 {
		t.Fatalf("a panic was not retried (requeues %d)", n)
	}
	if out := loop.Step(t); out.Panicked || out.Err != nil {
		t.Fatalf("retry = %+v", out)
	}
	if n := loop.NumRequeues("demo/app1"); n != 0 {
		t.Fatalf("a successful retry left %d requeues", n)
	}
}

// TestTerminalErrorIsDropped: a terminal error is not retried.
func TestTerminalErrorIsDropped(t *testing.T) {
	t.Parallel()
	loop := kittest.Start(t, func(context.Context, string) (controllerkit.Result, error) {
		return controllerkit.Result{}, reconcile.TerminalError(errors.New("malformed"))
	}, logr.Discard())
	loop.Enqueue("bad key")
	loop.Step(t)
	if n, adds := loop.NumRequeues("bad key"), loop.Adds("bad key"); n != 0 || len(adds) != 1 {
		t.Fatalf("terminal error requeued: %d rate-limited, adds %+v", n, adds)
	}
}

// errorSink records the messages logged at error level and at V(1).
type errorSink struct {
	mu            sync.Mutex
	errors, debug []string
}

func (s *errorSink) Init(logr.RuntimeInfo)          {}
func (s *errorSink) Enabled(int) bool               { return true }
func (s *errorSink) WithValues(...any) logr.LogSink { return s }
func (s *errorSink) WithName(string) logr.LogSink   { return s }
func (s *errorSink) Info(level int, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if level > 0 && level < 5 { // controller-runtime says every pass at V(5)
		s.debug = append(s.debug, msg)
	}
}
func (s *errorSink) Error(_ error, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors = append(s.errors, msg)
}
func (s *errorSink) get() (errors, debug []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errors...), append([]string(nil), s.debug...)
}

// TestQuietErrorIsRetriedAtV1: a Quiet error is retried with the rate limiter like any
// transient error, and logged at V(1), never at error level; a transient error is
// logged at error level.
func TestQuietErrorIsRetriedAtV1(t *testing.T) {
	t.Parallel()
	sink := &errorSink{}
	loop := kittest.Start(t, func(_ context.Context, key string) (controllerkit.Result, error) {
		if key == "demo/app1" {
			return controllerkit.Result{}, fmt.Errorf("applying hooks: %w", controllerkit.Quiet(errors.New("conflict")))
		}
		return controllerkit.Result{}, errors.New("loud")
	}, logr.New(sink))
	loop.Enqueue("demo/app1")
	loop.Step(t)
	if n := loop.NumRequeues("demo/app1"); n != 1 {
		t.Fatalf("quiet error: %d rate-limited requeues, want 1", n)
	}
	if errs, debug := sink.get(); len(errs) != 0 || len(debug) != 1 {
		t.Fatalf("quiet error logged errors %q, debug %q", errs, debug)
	}
	loop.Enqueue("demo/app2")
	for loop.Step(t).Key != "demo/app2" { // app1's retry may come first
	}
	if errs, _ := sink.get(); len(errs) != 1 {
		t.Fatalf("a transient error was not logged at error level: %q", errs)
	}
	if n := loop.NumRequeues("demo/app2"); n != 1 {
		t.Fatalf("transient error: %d rate-limited requeues, want 1", n)
	}
}
