package healthloop

import (
	"testing"
	"time"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestWaveCompleteEdge: the sync request fires once, when the last entry of the highest
// wave turns Healthy, and not on the next steady pass.
func TestWaveCompleteEdge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.lastAttempted("r1")
	f.configMap("w0", "true")
	f.configMap("w1a", "true")
	f.configMap("w1b", "false")
	f.inventory(cm("w0", 0, "r1"), cm("w1a", 1, "r1"), cm("w1b", 1, "r1"))
	f.pass() // first assessment of render r1: render-advanced fires
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("syncs after the first pass = %d, want 1 (render advanced)", n)
	}
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("a steady pass sent a sync request (%d)", n)
	}
	f.configMap("w1b", "true")
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("syncs after the frontier wave completed = %d, want 2", n)
	}
	rel := f.getRelease()
	if _, ok := rel.Annotations[v1alpha1.SyncRequestedAtAnnotation]; !ok {
		t.Fatalf("the sync request did not set %s", v1alpha1.SyncRequestedAtAnnotation)
	}
	f.pass()
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("steady passes after the edge sent requests: %d", n)
	}
}

// TestFrontierIsHighestWave: a lower wave turning Healthy is not the wave-complete edge.
func TestFrontierIsHighestWave(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   []itemResult
		want bool
	}{
		{"empty", nil, false},
		{"frontier turns healthy", []itemResult{item(0, "Healthy", "Healthy"), item(1, "Healthy", "Progressing")}, true},
		{"never assessed before", []itemResult{item(2, "Healthy", "")}, true},
		{"already healthy", []itemResult{item(1, "Healthy", "Healthy")}, false},
		{"only a lower wave turned", []itemResult{item(0, "Healthy", "Progressing"), item(1, "Progressing", "Progressing")}, false},
		{"frontier partly healthy", []itemResult{item(1, "Healthy", "Progressing"), item(1, "Unknown", "Progressing")}, false},
	}
	for _, tc := range cases {
		if got := frontierWaveCompleted(tc.in); got != tc.want {
			t.Errorf("%s: frontierWaveCompleted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func item(wave int32, now, before v1alpha1.HealthState) itemResult {
	return itemResult{entry: v1alpha1.InventoryEntry{Wave: &wave}, state: now, prior: prior{state: before}}
}

// TestRenderAdvancedEdge fires once per new render.
func TestRenderAdvancedEdge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "false")
	f.lastAttempted("r1")
	f.inventory(cm("a", 0, "r1"))
	f.pass()
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("syncs for render r1 = %d, want 1", n)
	}
	f.lastAttempted("r2")
	f.inventory(cm("a", 0, "r2"))
	f.pass()
	f.pass()
	if n := f.api.syncs.Load(); n != 2 {
		t.Fatalf("syncs after render r2 = %d, want 2", n)
	}
}

// TestFailedSyncIsRetried: a failed POST fails the pass, and the next pass sends it
// again although the edge has passed.
func TestFailedSyncIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	f.api.fail.Store(true)
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("a failed sync request did not fail the pass")
	}
	f.api.fail.Store(false)
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("syncs after the retry = %d, want 1", n)
	}
	f.pass()
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("a steady pass after the retry sent a request (%d)", n)
	}
}

// TestRecheckBackoff: 2, 4, 8, 16, 32, 32s (jitter 0); the idle requeue after the
// interval; a new pending target brings the delay back to 2s.
func TestRecheckBackoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "false")
	f.configMap("b", "true")
	f.inventory(cm("a", 0, ""), cm("b", 0, ""))
	var got []time.Duration
	for i := 0; i < 6; i++ {
		got = append(got, f.pass().RequeueAfter)
	}
	want := []time.Duration{2, 4, 8, 16, 32, 32}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays = %v, want %v seconds", got, want)
		}
	}
	// b turns pending: its count starts at 1, so the shortest delay is 2s again.
	f.configMap("b", "false")
	if d := f.pass().RequeueAfter; d != 2*time.Second {
		t.Fatalf("delay after a new pending target = %v, want 2s", d)
	}
	if c := f.h.attemptCounts(f.key); len(c) != 2 {
		t.Fatalf("attempt counts = %v", c)
	}
	// Nothing pending: counts clear; no interval, so no requeue.
	f.configMap("a", "true")
	f.configMap("b", "true")
	if d := f.pass().RequeueAfter; d != 0 {
		t.Fatalf("idle requeue without interval = %v", d)
	}
	if c := f.h.attemptCounts(f.key); len(c) != 0 {
		t.Fatalf("counts not cleared: %v", c)
	}
}

func TestRecheckIntervalCapAndIdle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 5*time.Second)
	f.configMap("a", "false")
	f.inventory(cm("a", 0, ""))
	var got []time.Duration
	for i := 0; i < 4; i++ {
		got = append(got, f.pass().RequeueAfter)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
	f.configMap("a", "true")
	if d := f.pass().RequeueAfter; d != 5*time.Second {
		t.Fatalf("idle requeue = %v, want the interval 5s", d)
	}
}

func TestProgressBackoffAndJitter(t *testing.T) {
	t.Parallel()
	want := map[int]time.Duration{0: 2, 1: 2, 2: 4, 3: 8, 4: 16, 5: 32, 6: 32, 100: 32, 1 << 30: 32}
	for count, w := range want {
		if got := progressBackoff(count, 0); got != w*time.Second {
			t.Errorf("progressBackoff(%d) = %v, want %vs", count, got, int(w))
		}
	}
	if got := progressBackoff(5, 10*time.Second); got != 10*time.Second {
		t.Errorf("capped = %v", got)
	}
	h := &HealthController{}
	for _, r := range []float64{0, 0.5, 0.999999} {
		h.Rand = func() float64 { return r }
		d := h.jitter(10 * time.Second)
		if d < 10*time.Second || d >= 12*time.Second {
			t.Errorf("jitter(%v) = %v, outside [10s, 12s)", r, d)
		}
	}
}
