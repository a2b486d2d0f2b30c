package fairshare

import (
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kumodo/convoy-observer/internal/controllerkit"
)

func newTestFairQueue(t *testing.T, o QueueOptions) *fairQueue {
	t.Helper()
	q := NewQueue(o)(fmt.Sprintf("fair-%s", t.Name()), controllerkit.NewRateLimiter()).(*fairQueue)
	t.Cleanup(q.ShutDown)
	return q
}

func req(ns, name string) reconcile.Request { return controllerkit.RequestOf(ns + "/" + name) }

// waitLen waits until the queue holds n ready keys (adds are buffered).
func waitLen(t *testing.T, q *fairQueue, n int) {
	t.Helper()
	for range 5000 {
		if q.Len() == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("queue holds %d keys, want %d", q.Len(), n)
}

// TestFairQueueQuietNamespaceFirst: a key of a quiet namespace added after a thousand
// keys of a busy one is handed out next, not after the thousand; the busy namespace's
// keys all follow in the order they came.
func TestFairQueueQuietNamespaceFirst(t *testing.T) {
	t.Parallel()
	q := newTestFairQueue(t, QueueOptions{})
	for i := range 1000 {
		q.Add(req("team-a", fmt.Sprint(i)))
	}
	q.Add(req("team-b", "web"))
	waitLen(t, q, 1001)
	first, _ := q.Get()
	second, _ := q.Get()
	if first != req("team-a", "0") || second != req("team-b", "web") {
		t.Fatalf("first two keys %v, %v; want team-a/0 then team-b/web", first, second)
	}
	q.Done(first)
	q.Done(second)
	for i := 1; i < 1000; i++ {
		got, _ := q.Get()
		if got != req("team-a", fmt.Sprint(i)) {
			t.Fatalf("key %d of team-a: got %v", i, got)
		}
		q.Done(got)
	}
}

// TestFairQueueWeights: with backlogs in two namespaces, a namespace of weight 3 gets
// three keys for each one of a namespace of weight 1.
func TestFairQueueWeights(t *testing.T) {
	t.Parallel()
	q := newTestFairQueue(t, QueueOptions{Weight: func(ns string) float64 {
		if ns == "heavy" {
			return 3
		}
		return 0 // invalid: 1
	}})
	for i := range 300 {
		q.Add(req("light", fmt.Sprint(i)))
		q.Add(req("heavy", fmt.Sprint(i)))
	}
	waitLen(t, q, 600)
	counts := map[string]int{}
	for range 200 {
		got, _ := q.Get()
		counts[got.Namespace]++
		q.Done(got)
	}
	if counts["heavy"] != 150 || counts["light"] != 50 {
		t.Fatalf("of 200 keys: heavy %d, light %d; want 150, 50", counts["heavy"], counts["light"])
	}
}

// TestFairQueuePriorities: the priority handed out is the one asked for (so a requeue
// does not lower a key twice), a key of the initial list (LowPriority) goes after a
// changed one, a re-added key keeps its place, and the wait of each key is reported.
func TestFairQueuePriorities(t *testing.T) {
	t.Parallel()
	waited := map[string]int{}
	q := newTestFairQueue(t, QueueOptions{Waited: func(ns string, d time.Duration) {
		if d < 0 {
			t.Errorf("negative wait %v", d)
		}
		waited[ns]++
	}})
	low := handler.LowPriority
	for i := range 5 {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, req("a", fmt.Sprint(i)))
	}
	q.Add(req("a", "3")) // already queued: raised to 0, keeps its rank
	q.Add(req("b", "x"))
	waitLen(t, q, 6)
	var order []string
	var prios []int
	for range 6 {
		got, p, _ := q.GetWithPriority()
		order = append(order, got.String())
		prios = append(prios, p)
		q.Done(got)
	}
	want := []string{"b/x", "a/3", "a/0", "a/1", "a/2", "a/4"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if fmt.Sprint(prios) != fmt.Sprint([]int{0, 0, low, low, low, low}) {
		t.Errorf("priorities %v, want the asked ones", prios)
	}
	if waited["a"] != 5 || waited["b"] != 1 {
		t.Errorf("waits reported %v", waited)
	}
}
