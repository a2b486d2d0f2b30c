package healthloop

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// seriesWith counts, by metric, the series in the manager's registry that carry every
// label of labels with its value.
func seriesWith(t *testing.T, labels map[string]string) map[string]int {
	t.Helper()
	families, err := metrics.Registry.Gather()
	must(t, err)
	out := map[string]int{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			match := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					match++
				}
			}
			if match == len(labels) {
				out[mf.GetName()]++
			}
		}
	}
	return out
}

// TestSeriesGoWithWhatTheyDescribe: the series of a Release (by namespace and release)
// go when it is deleted, and the series of its Cluster (target reads, informers) go
// with the last Release that reads it, and those of its namespace (passes, the fair
// evaluation, the queue wait) with the namespace's last Release: a Cluster deleted after its Releases is never
// seen missing by a pass, and a churn of tenants' Releases and Clusters must not grow
// the metrics.
func TestSeriesGoWithWhatTheyDescribe(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.watching()
	f.oneConfigMap("true")
	f.passHealthy()
	f.pass() // a read from the synced cache
	cluster := map[string]string{"cluster": f.ns + "/target"}
	release := map[string]string{"namespace": f.ns, "release": f.rel}
	if n := seriesWith(t, cluster); n["convoy_observer_target_reads_total"] == 0 {
		t.Fatalf("precondition: no read series of the cluster: %v", n)
	}
	if n := seriesWith(t, release); n["convoy_observer_release_entries"] == 0 {
		t.Fatalf("precondition: no series of the Release: %v", n)
	}
	must(t, env.Client.Delete(f.ctx, f.getRelease()))
	f.pass()
	if n := seriesWith(t, release); len(n) != 0 {
		t.Errorf("after the Release is gone, its series stay: %v", n)
	}
	if n := seriesWith(t, cluster); len(n) != 0 {
		t.Errorf("after the last Release of the cluster is gone, its series stay: %v", n)
	}
	if n := seriesWith(t, map[string]string{"namespace": f.ns}); len(n) != 0 {
		t.Errorf("after the last Release of the namespace is gone, its series stay: %v", n)
	}
}
