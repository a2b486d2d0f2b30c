package clustercache

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// series returns the label sets of c's series whose label label is value.
func series(c prometheus.Collector, label, value string) []map[string]string {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	var out []map[string]string
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels[label] == value {
			out = append(out, labels)
		}
	}
	return out
}

// counterValue sums the counters of c whose label label is value.
func counterValue(c prometheus.Collector, label, value string) float64 {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			continue
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				sum += pb.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestClusterSeriesAreBoundedAndForgotten: an inventory of made-up resource types (each
// list refused as unserved, so each falls back to GETs) adds one series per cluster, not
// one per type: no label takes its value from inside a tenant's object. When the Cluster
// is forgotten, every series of it goes (reads, fallbacks, informers).
func TestClusterSeriesAreBoundedAndForgotten(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	cache := New(Options{Local: env.Config, Watch: true})
	cluster := localCluster("madeup-" + ns)
	key := toolscache.MetaObjectToName(cluster).String()
	reader, err := cache.GetReader(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	const types = 20
	refs := make([]TargetRef, types)
	for i := range refs {
		gvr := schema.GroupVersionResource{Group: "made.up.example.com", Version: "v1", Resource: fmt.Sprintf("madeup%02d", i)}
		refs[i] = TargetRef{GVR: gvr, Kind: "MadeUp", Namespace: ns, Name: "x"}
	}
	cache.Track(ns+"/r", cluster, refs)
	eventually(t, "every made-up type to fall back to GETs", func() bool {
		return counterValue(watchFallbacks, "cluster", key) == types && len(cache.Scopes(key)) == 0
	})
	for _, r := range refs {
		_, _ = reader.Get(ctx, r.GVR, r.Namespace, r.Name)
	}
	if got := series(watchFallbacks, "cluster", key); len(got) != 1 {
		t.Errorf("%d fallback series for one cluster, want 1: %v", len(got), got)
	}
	if len(series(targetReads, "cluster", key)) == 0 {
		t.Fatal("precondition: no read series of the cluster")
	}

	cache.Forget(cluster.Namespace, cluster.Name)
	for name, c := range map[string]prometheus.Collector{"target_reads_total": targetReads, "target_watch_fallbacks_total": watchFallbacks, "target_informers": watchedScopes} {
		if got := series(c, "cluster", key); len(got) != 0 {
			t.Errorf("after Forget, %s still has series of the cluster: %v", name, got)
		}
	}
	// A read through the reader a pass still holds counts nothing for a forgotten cluster.
	_, _ = reader.Get(ctx, refs[0].GVR, ns, "x")
	if got := series(targetReads, "cluster", key); len(got) != 0 {
		t.Errorf("a read after Forget brought back %v", got)
	}
}
