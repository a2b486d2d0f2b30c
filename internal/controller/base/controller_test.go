package base

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// TestRateLimiterSaturates: 5ms doubling to 1000s; the 18th failure waits 10m55.36s and
// every later one 16m40s, never 0 or negative; Forget starts over (shared/cases 23).
func TestRateLimiterSaturates(t *testing.T) {
	t.Parallel()
	rl := NewRateLimiter()
	for i := 1; i <= 100; i++ {
		d := rl.When("k")
		switch {
		case i == 1 && d != 5*time.Millisecond:
			t.Fatalf("failure 1 waits %v", d)
		case i == 18 && d != 10*time.Minute+55*time.Second+360*time.Millisecond:
			t.Fatalf("failure 18 waits %v", d)
		case i > 18 && d != 1000*time.Second:
			t.Fatalf("failure %d waits %v, want 16m40s", i, d)
		case d <= 0:
			t.Fatalf("failure %d waits %v", i, d)
		}
	}
	rl.Forget("k")
	if d := rl.When("k"); d != 5*time.Millisecond {
		t.Fatalf("after Forget: %v", d)
	}
}

// TestScheduledRecheckForgets: a pass that schedules a re-check clears the failure
// count, so the next error retries from the base delay (shared/cases 24).
func TestScheduledRecheckForgets(t *testing.T) {
	t.Parallel()
	fail := true
	c := NewController("test-forget", 1, func(context.Context, string) (Result, error) {
		if fail {
			return Result{}, errors.New("evaluation failed")
		}
		return Result{RequeueAfter: time.Hour}, nil
	})
	defer c.Queue.ShutDown()
	ctx := context.Background()
	for i := 0; i < 19; i++ {
		res, err := c.safeSync(ctx, "demo/app1")
		c.handleErr("demo/app1", res, err)
	}
	if n := c.Queue.NumRequeues("demo/app1"); n != 19 {
		t.Fatalf("requeues = %d, want 19", n)
	}
	fail = false
	res, err := c.safeSync(ctx, "demo/app1")
	c.handleErr("demo/app1", res, err)
	if n := c.Queue.NumRequeues("demo/app1"); n != 0 {
		t.Fatalf("requeues after a scheduled re-check = %d, want 0", n)
	}
}

// TestQueuesHaveTheirOwnLimiter: a success in one queue never resets the backoff of the
// same key in another (shared/cases 26).
func TestQueuesHaveTheirOwnLimiter(t *testing.T) {
	t.Parallel()
	a := NewController("test-a", 1, nil)
	b := NewController("test-b", 1, nil)
	defer a.Queue.ShutDown()
	defer b.Queue.ShutDown()
	for i := 0; i < 3; i++ {
		a.handleErr("demo/app1", Result{}, errors.New("x"))
	}
	b.handleErr("demo/app1", Result{}, nil) // success: Forget in b
	if n := a.Queue.NumRequeues("demo/app1"); n != 3 {
		t.Fatalf("a's failure count = %d after b's success, want 3", n)
	}
}

// TestPanicIsAnError: a panicking pass is retried and the worker survives.
func TestPanicIsAnError(t *testing.T) {
	t.Parallel()
	calls := 0
	c := NewController("test-panic", 1, func(context.Context, string) (Result, error) {
		calls++
		if calls == 1 {
			var m map[string]int
			m["boom"]++ // nil map write panics
		}
		return Result{}, nil
	})
	defer c.Queue.ShutDown()
	c.Enqueue("demo/app1")
	if !c.ProcessNextWorkItem(context.Background()) {
		t.Fatal("queue shut down")
	}
	if n := c.Queue.NumRequeues("demo/app1"); n != 1 {
		t.Fatalf("a panic was not retried (requeues %d)", n)
	}
}

// TestTerminalErrorIsDropped: a terminal error is not retried.
func TestTerminalErrorIsDropped(t *testing.T) {
	t.Parallel()
	c := NewController("test-terminal", 1, nil)
	defer c.Queue.ShutDown()
	c.handleErr("bad key", Result{}, Terminal(errors.New("malformed")))
	if n := c.Queue.NumRequeues("bad key"); n != 0 || c.Queue.Len() != 0 {
		t.Fatalf("terminal error requeued: %d, len %d", n, c.Queue.Len())
	}
}

// errorSink records the messages logged at error level and at V(1).
type errorSink struct {
	errors, debug []string
}

func (s *errorSink) Init(logr.RuntimeInfo)          {}
func (s *errorSink) Enabled(int) bool               { return true }
func (s *errorSink) WithValues(...any) logr.LogSink { return s }
func (s *errorSink) WithName(string) logr.LogSink   { return s }
func (s *errorSink) Info(level int, msg string, _ ...any) {
	if level > 0 {
		s.debug = append(s.debug, msg)
	}
}
func (s *errorSink) Error(_ error, msg string, _ ...any) { s.errors = append(s.errors, msg) }

// TestQuietErrorIsRetriedAtV1: a Quiet error is retried with the rate limiter like any
// transient error, and logged at V(1), never at error level.
func TestQuietErrorIsRetriedAtV1(t *testing.T) {
	t.Parallel()
	c := NewController("test-quiet", 1, nil)
	defer c.Queue.ShutDown()
	sink := &errorSink{}
	c.Log = logr.New(sink)
	err := fmt.Errorf("applying hooks: %w", Quiet(errors.New("conflict")))
	c.handleErr("demo/app1", Result{}, err)
	if n := c.Queue.NumRequeues("demo/app1"); n != 1 {
		t.Fatalf("quiet error: %d rate-limited requeues, want 1", n)
	}
	if len(sink.errors) != 0 || len(sink.debug) != 1 {
		t.Fatalf("quiet error logged errors %q, debug %q", sink.errors, sink.debug)
	}
	c.handleErr("demo/app2", Result{}, errors.New("loud"))
	if len(sink.errors) != 1 {
		t.Fatalf("a transient error was not logged at error level: %q", sink.errors)
	}
}
