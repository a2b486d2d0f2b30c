package healthloop

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// Metrics of the health loop, served with controller-runtime's on --metrics-bind-address.
var (
	// releaseSeries are the per-Release gauges convoy_observer_release_entries (each
	// Release's inventory entries by state, as in its healthSummary) and
	// convoy_observer_release_unjudged_entries (each assessed Release's entries that no
	// selected rule judges).
	releaseSeries = newReleaseGauges()

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
	metrics.Registry.MustRegister(releaseSeries, assessmentFailures, syncRequests, writeConflicts, targetWakeups,
		evaluationCPU, evaluationCost, passesTotal, budgetCuts, budgetCutEntries, evaluationWait, queueWait)
}

// recordSummary sets the entry gauges of a Release from its summary.
func recordSummary(namespace, name string, s *v1alpha1.HealthSummary) {
	if s == nil {
		return
	}
	releaseSeries.update(namespace, name, func(v *releaseValues) {
		v.healthy, v.progressing, v.degraded, v.unknown = s.Healthy, s.Progressing, s.Degraded, s.Unknown
		v.hasEntries = true
	})
}

// recordUnjudged sets the unjudged-entries gauge of a Release that was assessed.
func recordUnjudged(namespace, name string, n int) {
	releaseSeries.update(namespace, name, func(v *releaseValues) { v.unjudged, v.hasUnjudged = int32(n), true })
}

// forgetUnjudged drops the unjudged-entries series of a Release that asks for no
// assessment (spec.healthAssessment unset): nothing is selected, and nothing is missed.
func forgetUnjudged(namespace, name string) {
	releaseSeries.update(namespace, name, func(v *releaseValues) { v.unjudged, v.hasUnjudged = 0, false })
}

// forgetMetrics drops the series of a deleted Release.
func forgetMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "release": name}
	releaseSeries.update(namespace, name, func(v *releaseValues) { *v = releaseValues{} })
	assessmentFailures.DeletePartialMatch(labels)
}

// forgetNamespaceMetrics drops the series by namespace (the fair evaluation's, the
// passes', the queue wait's) of a namespace that has no Release left in the cache:
// namespaces come and go (a preview environment's, a tenant's), and the series of those
// gone must not accumulate. A Release created there later makes them again, from zero
// (a counter reset, as after a restart).
func (h *HealthController) forgetNamespaceMetrics(ctx context.Context, namespace string) {
	var left v1alpha1.ReleaseList
	if err := h.Reader.List(ctx, &left, client.InNamespace(namespace), client.Limit(1), client.UnsafeDisableDeepCopy); err != nil || len(left.Items) > 0 {
		return
	}
	for _, vec := range []*prometheus.MetricVec{evaluationCPU.MetricVec, evaluationCost.MetricVec, passesTotal.MetricVec,
		budgetCuts.MetricVec, budgetCutEntries.MetricVec, evaluationWait.MetricVec, queueWait.MetricVec} {
		vec.DeleteLabelValues(namespace)
	}
}

// Metrics per namespace of the fair evaluation.
var (
	evaluationCPU = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_evaluation_cpu_seconds_total",
		Help: "CPU seconds of the health rules' evaluations, by the namespace of the Release.",
	}, []string{"namespace"})
	evaluationCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_evaluation_cost_total",
		Help: "CEL cost units charged to the health rules' evaluations, by the namespace of the Release.",
	}, []string{"namespace"})
	passesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_passes_total",
		Help: "Health passes started, by the namespace of the Release.",
	}, []string{"namespace"})
	budgetCuts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_evaluation_budget_cuts_total",
		Help: "Health passes that spent their evaluation budget (--pass-evaluation-budget) before evaluating every entry, by the namespace of the Release.",
	}, []string{"namespace"})
	budgetCutEntries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_evaluation_budget_unevaluated_entries_total",
		Help: "Inventory entries left Unknown because their pass spent its evaluation budget, by the namespace of the Release.",
	}, []string{"namespace"})
	evaluationWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "convoy_observer_evaluation_wait_seconds",
		Help:    "Time an evaluation waited for one of the evaluation slots (GOMAXPROCS), by the namespace of the Release.",
		Buckets: []float64{0.0001, 0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30},
	}, []string{"namespace"})

	queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "convoy_observer_queue_wait_seconds",
		Help:    "Time a Release key waited in the loop's queue from when it was ready until a worker took it (retries not counted), by the namespace of the Release.",
		Buckets: []float64{0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300},
	}, []string{"namespace"})
)

// observeQueueWait records the queue wait of a key of namespace.
func observeQueueWait(namespace string, wait time.Duration) {
	queueWait.WithLabelValues(namespace).Observe(wait.Seconds())
}
