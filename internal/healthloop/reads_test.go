package healthloop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// gateReader holds every read until the gate opens, and records the most reads it held
// at once.
type gateReader struct {
	gate    chan struct{}
	mu      sync.Mutex
	in, max int
}

func (r *gateReader) Get(_ context.Context, _ schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	r.mu.Lock()
	r.in++
	r.max = max(r.max, r.in)
	r.mu.Unlock()
	<-r.gate
	r.mu.Lock()
	r.in--
	r.mu.Unlock()
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns}}}, nil
}

func (r *gateReader) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.in
}

// TestReadsRunConcurrentlyWithABound: the objects of one Release are read concurrently,
// never more than ReadConcurrency at a time, and every entry gets a result. The reads
// are held until as many as the bound are in flight, and a little longer, so an
// unbounded pass would show more.
func TestReadsRunConcurrentlyWithABound(t *testing.T) {
	t.Parallel()
	const limit, n = 4, 12
	h := &HealthController{ReadConcurrency: limit, Log: testLogger()}
	reader := &gateReader{gate: make(chan struct{})}
	entries := make([]v1alpha1.InventoryEntry, n)
	for i := range entries {
		entries[i] = v1alpha1.InventoryEntry{Kind: "ConfigMap", Namespace: "d", Name: fmt.Sprintf("cm%02d", i), Version: "v1", Resource: "configmaps"}
	}
	ev, err := health.NewEvaluator(nil, nil)
	must(t, err)
	type outcome struct {
		results []entryObservation
		err     error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := h.observeItems(context.Background(), nil, ev, reader, entries, map[inventory.Key]prior{})
		done <- outcome{r, err}
	}()
	eventually(t, "reads in flight", func() bool { return reader.held() >= limit })
	time.Sleep(200 * time.Millisecond) // room for reads beyond the bound to start
	close(reader.gate)
	out := <-done
	must(t, out.err)
	if reader.max != limit {
		t.Fatalf("at most %d reads were in flight together, want exactly %d", reader.max, limit)
	}
	if len(out.results) != n {
		t.Fatalf("results = %d", len(out.results))
	}
	for i := range out.results {
		if st := judgeEntry(&out.results[i], nil, false, t0, 0).state; st != v1alpha1.StateHealthy {
			t.Fatalf("%s = %s", out.results[i].key, st)
		}
	}
}

// latencyReader answers every read after a fixed delay, like a remote API server.
type latencyReader struct{ delay time.Duration }

func (r latencyReader) Get(_ context.Context, _ schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	time.Sleep(r.delay)
	return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": ns}}}, nil
}

// BenchmarkAssessItems measures one pass over 100 entries whose reads take 2ms each, at
// several read concurrencies: compare the ratios with benchstat, not absolute times.
func BenchmarkAssessItems(b *testing.B) {
	entries := make([]v1alpha1.InventoryEntry, 100)
	for i := range entries {
		entries[i] = v1alpha1.InventoryEntry{Kind: "ConfigMap", Namespace: "d", Name: fmt.Sprintf("cm%03d", i), Version: "v1", Resource: "configmaps"}
	}
	ev, err := health.NewEvaluator(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []int{1, 4, DefaultReadConcurrency} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
			h := &HealthController{ReadConcurrency: c, Log: testLogger()}
			for b.Loop() {
				if _, err := h.observeItems(context.Background(), nil, ev, latencyReader{2 * time.Millisecond}, entries, map[inventory.Key]prior{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEmptyInventoryNeedsNoCluster: a Release whose inventory has no entries is Healthy
// with 0/0 healthy even when its Cluster is gone: there is nothing to read
// (docs/operations.md, "The Healthy condition").
func TestEmptyInventoryNeedsNoCluster(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.inventory()
	must(t, env.Client.Delete(f.ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "target", Namespace: f.ns}}))
	f.pass()
	if c := f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy); c.Message != "0/0 healthy" {
		t.Fatalf("message = %q", c.Message)
	}
}

// TestReferencesThatLeaveTheirPath: an entry whose resource climbs out of its URL
// ("configmaps/../../../namespaces" with the name of a Namespace: the cleaned URL names
// that Namespace) and a hook whose workload name does the same are never read: the entry
// is Unknown and the hook Failed, each saying which field is invalid.
func TestReferencesThatLeaveTheirPath(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	escape := cm(f.ns, 0, "")
	escape.resource = "configmaps/../../../namespaces"
	f.inventory(escape)
	f.hooks(hook{name: "h", kind: "Job", workload: "x/../y", createdAt: t0.Add(-time.Minute)})
	f.pass()
	e := f.entry(f.ns)
	if e.State != v1alpha1.StateUnknown || !strings.Contains(e.Message, `invalid object reference: resource "configmaps/../../../namespaces"`) {
		t.Fatalf("entry: state %s, message %q; want Unknown naming the invalid resource", e.State, e.Message)
	}
	if h := f.hookEntry("h"); h.State != v1alpha1.HookFailed || !strings.Contains(h.Message, `invalid object reference: name "x/../y"`) {
		t.Fatalf("hook: state %s, message %q; want Failed naming the invalid name", h.State, h.Message)
	}
}

// heldReader holds the objects named in held in memory (clustercache.CachedReader) and
// answers the others with Get; it counts both.
type heldReader struct {
	held             map[string]bool
	mu               sync.Mutex
	gets, cachedHits []string
	askedCached      []string
}

func configMap(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns}}}
}

func (r *heldReader) Get(_ context.Context, _ schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gets = append(r.gets, name)
	return configMap(ns, name), nil
}

func (r *heldReader) GetCached(_ schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.askedCached = append(r.askedCached, name)
	if !r.held[name] {
		return nil, false
	}
	r.cachedHits = append(r.cachedHits, name)
	return configMap(ns, name), true
}

// TestCachedEntriesAreReadFromMemory: a pass asks a reader that holds objects in memory
// for each entry first, reads with Get only those it does not hold, never asks it for a
// reference that CheckReference refuses, and gives every entry the same result either
// way.
func TestCachedEntriesAreReadFromMemory(t *testing.T) {
	t.Parallel()
	h := &HealthController{Log: testLogger()}
	reader := &heldReader{held: map[string]bool{"cm0": true, "cm2": true, "cm3": true}}
	entries := []v1alpha1.InventoryEntry{
		{Kind: "ConfigMap", Namespace: "d", Name: "cm0", Version: "v1", Resource: "configmaps"},
		{Kind: "ConfigMap", Namespace: "d", Name: "cm1", Version: "v1", Resource: "configmaps"},
		{Kind: "ConfigMap", Namespace: "d", Name: "cm2", Version: "v1", Resource: "configmaps"},
		{Kind: "ConfigMap", Namespace: "d", Name: "cm3", Version: "v1", Resource: "configmaps/../../../namespaces"},
	}
	ev, err := health.NewEvaluator(nil, nil)
	must(t, err)
	results, err := h.observeItems(context.Background(), nil, ev, reader, entries, map[inventory.Key]prior{})
	must(t, err)
	slices.Sort(reader.gets)
	slices.Sort(reader.cachedHits)
	slices.Sort(reader.askedCached)
	if want := []string{"cm1"}; !slices.Equal(reader.gets, want) {
		t.Errorf("GETs = %v, want %v", reader.gets, want)
	}
	if want := []string{"cm0", "cm2"}; !slices.Equal(reader.cachedHits, want) {
		t.Errorf("read from memory = %v, want %v", reader.cachedHits, want)
	}
	if want := []string{"cm0", "cm1", "cm2"}; !slices.Equal(reader.askedCached, want) {
		t.Errorf("asked the cache for %v, want %v (never a refused reference)", reader.askedCached, want)
	}
	if len(results) != len(entries) {
		t.Fatalf("results = %d, want %d", len(results), len(entries))
	}
	for i := range results {
		o := &results[i]
		want := v1alpha1.StateHealthy
		if o.key.Name == "cm3" {
			want = v1alpha1.StateUnknown
		}
		if st := judgeEntry(o, nil, false, t0, 0).state; st != want {
			t.Errorf("%s = %s %q, want %s", o.key, st, o.res.Message, want)
		}
	}
}
