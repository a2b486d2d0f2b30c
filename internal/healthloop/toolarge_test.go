package healthloop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// countingClusters counts the reads of target objects through the readers it hands
// out: reads with Get, and objects answered from memory (clustercache.CachedReader, when
// the cluster's reader watches).
type countingClusters struct {
	clustercache.ClusterCache
	reads, cached atomic.Int64
}

func (c *countingClusters) GetReader(ctx context.Context, cluster *v1alpha1.Cluster) (clustercache.ObjectReader, error) {
	r, err := c.ClusterCache.GetReader(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return countingTargets{r, c}, nil
}

type countingTargets struct {
	clustercache.ObjectReader
	c *countingClusters
}

func (r countingTargets) Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	r.c.reads.Add(1)
	return r.ObjectReader.Get(ctx, gvr, ns, name)
}

func (r countingTargets) GetCached(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, bool) {
	cr, ok := r.ObjectReader.(clustercache.CachedReader)
	if !ok {
		return nil, false
	}
	obj, ok := cr.GetCached(gvr, ns, name)
	if ok {
		r.c.cached.Add(1)
	}
	return obj, ok
}

func (r countingTargets) List(ctx context.Context, gvr schema.GroupVersionResource, ns string, sel labels.Selector) ([]unstructured.Unstructured, error) {
	l, ok := r.ObjectReader.(clustercache.ObjectLister)
	if !ok {
		return nil, fmt.Errorf("the reader %T cannot list", r.ObjectReader)
	}
	return l.List(ctx, gvr, ns, sel)
}

// refusingWriter refuses every entries apply with err while it is set and passes
// everything else (and every write once err is nil) to the API server; it counts the
// writes it was asked for, by field manager.
type refusingWriter struct {
	client.Client
	mu     sync.Mutex
	err    error
	writes map[string]int
}

func (w *refusingWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	owner := applyOwner(opts)
	w.mu.Lock()
	if w.writes == nil {
		w.writes = map[string]int{}
	}
	w.writes[owner]++
	err := w.err
	w.mu.Unlock()
	if err != nil && owner == inventory.FieldManagerInventory {
		return err
	}
	return w.Client.Apply(ctx, obj, opts...)
}

func (w *refusingWriter) Status() client.SubResourceWriter {
	return refusingStatus{w.Client.Status(), w}
}

type refusingStatus struct {
	client.SubResourceWriter
	w *refusingWriter
}

func (s refusingStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	o := &client.SubResourceApplyOptions{}
	o.ApplyOpts(opts)
	s.w.mu.Lock()
	if s.w.writes == nil {
		s.w.writes = map[string]int{}
	}
	s.w.writes[o.FieldManager]++
	s.w.mu.Unlock()
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

func (w *refusingWriter) count(owner string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes[owner]
}

// grpcTooLarge is what the API server answers when the object it would store is
// larger than its gRPC client sends to etcd: a 500 without a reason (seen with an
// inventory of 4000 entries).
func grpcTooLarge() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500,
		Message: "rpc error: code = ResourceExhausted desc = trying to send message larger than max (2398635 vs. 2097152)"}}
}

// TestTooLargeIsSaidOnce: an entries write refused as too large, in each form the API
// server refuses one (413; a 500 with etcd's error; a 500 with gRPC's), ends the pass
// without an error for the queue to retry, with Healthy=Unknown naming the entries and
// the bytes and saying to split the Release, written once. Until the inventory changes,
// or the Release's interval passes, a pass reads no target object and writes nothing;
// a changed inventory is assessed again.
func TestTooLargeIsSaidOnce(t *testing.T) {
	t.Parallel()
	for name, refusal := range map[string]error{
		"413":  apierrors.NewRequestEntityTooLargeError("limit is 3145728"),
		"etcd": apierrors.NewInternalError(errors.New(etcdRequestTooLarge)),
		"grpc": grpcTooLarge(),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.readyRelease(0, time.Hour)
			f.configMap("a", "true")
			f.configMap("b", "false")
			f.inventory(cm("a", 0, ""), cm("b", 0, ""))
			clusters := &countingClusters{ClusterCache: f.h.Clusters}
			f.h.Clusters = clusters
			w := &refusingWriter{Client: env.Client, err: refusal}
			f.h.Writer = w

			res, err := f.h.syncHandler(f.ctx, f.key)
			if err != nil {
				t.Fatalf("a refused write failed the pass (the queue retries it at once): %v", err)
			}
			if res.RequeueAfter != time.Hour {
				t.Errorf("next pass after %v, want the interval", res.RequeueAfter)
			}
			c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
			for _, want := range []string{"2 entries", " bytes", "exceeds the API server's size limit", "split the Release"} {
				if !strings.Contains(c.Message, want) {
					t.Errorf("condition message %q does not say %q", c.Message, want)
				}
			}
			reads, statusWrites, entryWrites := clusters.reads.Load(), w.count(inventory.FieldManagerHealth), w.count(inventory.FieldManagerInventory)
			if reads != 2 || statusWrites != 1 {
				t.Fatalf("first pass: %d reads, %d condition writes; want 2 and 1", reads, statusWrites)
			}

			// The same inventory: said once, not read again.
			relRV := f.getRelease().ResourceVersion
			for range 3 {
				if _, err := f.h.syncHandler(f.ctx, f.key); err != nil {
					t.Fatalf("a pass over the refused inventory: %v", err)
				}
			}
			if got := clusters.reads.Load(); got != reads {
				t.Errorf("passes over the same refused inventory read %d target objects", got-reads)
			}
			if got := w.count(inventory.FieldManagerInventory); got != entryWrites {
				t.Errorf("passes over the same refused inventory tried %d more entries writes", got-entryWrites)
			}
			if f.getRelease().ResourceVersion != relRV {
				t.Error("passes over the same refused inventory rewrote the Release")
			}

			// After the interval, it is tried again.
			f.clock.Step(time.Hour)
			_, _ = f.h.syncHandler(f.ctx, f.key)
			if got := clusters.reads.Load(); got != reads+2 {
				t.Errorf("after the interval: %d reads, want %d", got, reads+2)
			}

			// The controller-manager splits the inventory: it fits, and is written.
			w.mu.Lock()
			w.err = nil
			w.mu.Unlock()
			f.inventory(cm("a", 0, ""))
			f.passHealthy()
			f.expectEntry("a", v1alpha1.StateHealthy, "")
		})
	}
}
