package health

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// Metrics of the health loop, served with controller-runtime's on --metrics-bind-address.
var (
	// releaseEntries counts each Release's inventory entries by state, as in its
	// healthSummary.
	releaseEntries = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "convoy_observer_release_entries",
		Help: "Inventory entries of a Release by health state, as last written to its healthSummary.",
	}, []string{"namespace", "release", "state"})

	// assessmentFailures counts passes whose assessment failed (Healthy=Unknown).
	assessmentFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_assessment_failures_total",
		Help: "Health passes whose assessment failed: rules that do not compile, a missing or unreachable Cluster.",
	}, []string{"namespace", "release"})

	// syncRequests counts the POST …/sync requests by result (ok, error, gone: the Release no longer exists).
	syncRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_sync_requests_total",
		Help: "Sync requests sent to convoy-api to wake the controller-manager, by result.",
	}, []string{"result"})

	// writeConflicts counts writes of the observer's own fields that failed a
	// precondition (the inventory's uid or resourceVersion: a lagging cache or a
	// concurrent writer) and were requeued quietly, by write (hooks, entries, status).
	writeConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_write_conflicts_total",
		Help: "Writes of the observer's own fields that met a conflict (a lagging cache or another writer) and were retried, by write.",
	}, []string{"write"})

	// targetWakeups counts the passes that a change of a watched target object queued.
	targetWakeups = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "convoy_observer_target_wakeups_total",
		Help: "Release keys queued because a target object that the Release records (or a polled hook workload) changed.",
	})
)

func init() {
	metrics.Registry.MustRegister(releaseEntries, assessmentFailures, syncRequests, writeConflicts, targetWakeups)
}

// recordSummary sets the entry gauges of a Release from its summary.
func recordSummary(namespace, name string, s *v1alpha1.HealthSummary) {
	if s == nil {
		return
	}
	for state, n := range map[v1alpha1.HealthState]int32{
		v1alpha1.StateHealthy: s.Healthy, v1alpha1.StateProgressing: s.Progressing,
		v1alpha1.StateDegraded: s.Degraded, v1alpha1.StateUnknown: s.Unknown,
	} {
		releaseEntries.WithLabelValues(namespace, name, string(state)).Set(float64(n))
	}
}

// forgetMetrics drops the series of a deleted Release.
func forgetMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "release": name}
	releaseEntries.DeletePartialMatch(labels)
	assessmentFailures.DeletePartialMatch(labels)
}
