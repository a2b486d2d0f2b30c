package fairshare

import (
	"context"
	"errors"
	"testing"
	"time"
)

// gateRun drives an Gate by hand: each evaluation waits until the test finishes it,
// and the order of the grants is recorded.
type gateRun struct {
	t      *testing.T
	g      *Gate
	active chan gateGrant
}

type gateGrant struct {
	name   string
	ticket Ticket
}

func newGateRun(t *testing.T, slots int) *gateRun {
	return &gateRun{t: t, g: NewGate(slots), active: make(chan gateGrant, 10000)}
}

// submit starts an evaluation of namespace in pass, named name, and returns once it is
// granted or queued, so the submission order is the test's.
func (r *gateRun) submit(namespace, name string, weight float64, pass uint64) {
	n0 := r.inGate()
	go func() {
		t, err := r.g.Acquire(context.Background(), namespace, weight, pass)
		if err != nil {
			r.t.Error(err)
			return
		}
		r.active <- gateGrant{name: name, ticket: t}
	}()
	for r.inGate() == n0 {
		time.Sleep(100 * time.Microsecond)
	}
}

// inGate is the number of evaluations waiting in or holding a slot of the gate.
func (r *gateRun) inGate() int {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	return r.g.waiting + r.g.busy
}

// finishNext finishes the evaluation granted next, charging it cpu, and returns its name.
func (r *gateRun) finishNext(cpu time.Duration) string {
	g := <-r.active
	g.ticket.Done(cpu)
	return g.name
}

// TestGateServesQuietNamespaceFirst: one slot, a busy namespace with a backlog of 200
// evaluations of 10 ms each, and one evaluation of a quiet namespace queued behind them.
// The quiet one is served after at most one more evaluation of the busy one, not after
// the backlog; and the busy namespace is never starved: all its evaluations run.
func TestGateServesQuietNamespaceFirst(t *testing.T) {
	t.Parallel()
	r := newGateRun(t, 1)
	for i := range 200 {
		r.submit("team-a", "a", 1, uint64(i/50)) // four passes of 50 entries
	}
	r.finishNext(10 * time.Millisecond) // a holds the slot, a's backlog is charged
	r.finishNext(10 * time.Millisecond)
	r.submit("team-b", "b", 1, 1000)
	servedBefore := 0
	for {
		name := r.finishNext(10 * time.Millisecond)
		if name == "b" {
			break
		}
		servedBefore++
	}
	if servedBefore > 1 {
		t.Errorf("the quiet namespace's evaluation waited behind %d evaluations of the busy one; want at most the one in flight", servedBefore)
	}
	rest := 0
	for r.inGate() > 0 {
		r.finishNext(10 * time.Millisecond)
		rest++
	}
	if got := 2 + servedBefore + rest; got != 200 {
		t.Errorf("the busy namespace got %d of its 200 evaluations", got)
	}
}

// TestGateSharesByWeight: two namespaces with long backlogs of equally expensive
// evaluations share one slot in proportion to their weights.
func TestGateSharesByWeight(t *testing.T) {
	t.Parallel()
	r := newGateRun(t, 1)
	r.submit("hold", "hold", 1, 0) // holds the slot while the backlogs queue
	for i := range 300 {
		r.submit("light", "light", 1, uint64(i))
		r.submit("heavy", "heavy", 3, uint64(i))
	}
	r.finishNext(time.Millisecond)
	counts := map[string]int{}
	for range 200 {
		counts[r.finishNext(10*time.Millisecond)]++
	}
	// 3:1 is 150:50; allow a few grants of slack for the estimates.
	if counts["heavy"] < 140 || counts["heavy"] > 160 {
		t.Errorf("of 200 grants, weight 3 got %d and weight 1 got %d; want about 150:50", counts["heavy"], counts["light"])
	}
	for r.inGate() > 0 {
		r.finishNext(10 * time.Millisecond)
	}
}

// TestGateServesEarlierPassFirst: within a namespace, the evaluations of an earlier pass
// go before those of a later one, whatever the order they arrived in.
func TestGateServesEarlierPassFirst(t *testing.T) {
	t.Parallel()
	r := newGateRun(t, 1)
	r.submit("ns", "hold", 1, 0)
	for range 5 {
		r.submit("ns", "late", 1, 9)
	}
	for range 5 {
		r.submit("ns", "early", 1, 3)
	}
	r.finishNext(time.Millisecond)
	for i := range 10 {
		want := "early"
		if i >= 5 {
			want = "late"
		}
		if got := r.finishNext(time.Millisecond); got != want {
			t.Fatalf("grant %d went to %s; want %s", i, got, want)
		}
	}
}

// TestGateCancelledWaiter: a waiter whose context ends leaves the queue and takes no
// slot; the gate then forgets the idle namespace.
func TestGateCancelledWaiter(t *testing.T) {
	t.Parallel()
	g := NewGate(1)
	hold, err := g.Acquire(context.Background(), "a", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { _, err := g.Acquire(ctx, "b", 1, 1); errc <- err }()
	for {
		g.mu.Lock()
		w := g.waiting
		g.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	hold.Done(time.Millisecond)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy != 0 || g.waiting != 0 {
		t.Fatalf("busy %d, waiting %d after everything ended", g.busy, g.waiting)
	}
	if _, ok := g.flows["b"]; ok {
		t.Error("the cancelled namespace is still remembered")
	}
}
