package clustercache

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the target-object cache, served with controller-runtime's on
// --metrics-bind-address.
var (
	// targetReads counts reads of target objects by where the answer came from: "cache",
	// or a GET because the type is "unwatched", fell back ("fallback": its list/watch is
	// forbidden or unserved), its watch failed ("watch-failed"), its informer had
	// "not-synced" yet, or the object was a "miss" in the synced cache; "list" counts the
	// LISTs of a failing workload's Pods and ReplicaSets for its diagnosis.
	targetReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_target_reads_total",
		Help: "Reads of target objects by cluster and source (cache, or the reason of a GET: unwatched, fallback, watch-failed, not-synced, miss; list: a failing workload's Pods for its diagnosis).",
	}, []string{"cluster", "source"})

	// watchFallbacks counts the types whose list or watch was refused, so they are read
	// with GETs for a while. The type is logged, not a label: it comes from a tenant's
	// inventory, and one inventory of made-up types would make a series of each.
	watchFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_target_watch_fallbacks_total",
		Help: "Resource types of a target cluster whose list or watch was forbidden or unserved, so they fell back to GETs (the log names the type).",
	}, []string{"cluster"})

	// secretWatchFallbacks counts the kubeconfig Secrets whose list or watch was
	// refused, so they are read with GETs for a while.
	secretWatchFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "convoy_observer_secret_watch_fallbacks_total",
		Help: "Kubeconfig Secrets (namespace/name) whose list or watch was forbidden, so they fell back to GETs.",
	}, []string{"secret"})

	// watchedScopes is the number of running informers per target cluster.
	watchedScopes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "convoy_observer_target_informers",
		Help: "Running informers (resource type, namespace or all namespaces) per target cluster.",
	}, []string{"cluster"})
)

// Labels (docs/operations.md, "Probes, metrics and logs"): no label takes its value from
// inside a tenant's object. "cluster" is a Cluster's namespace/name and "secret" a
// kubeconfig Secret's: object names, whose series go with what they describe
// (forgetClusterMetrics when the Cluster is forgotten, forgetSecretMetrics when no
// Cluster references the Secret any more).

func init() {
	metrics.Registry.MustRegister(targetReads, watchFallbacks, secretWatchFallbacks, watchedScopes)
}

// forgetClusterMetrics drops every series of the Cluster key.
func forgetClusterMetrics(cluster string) {
	labels := prometheus.Labels{"cluster": cluster}
	targetReads.DeletePartialMatch(labels)
	watchFallbacks.DeletePartialMatch(labels)
	watchedScopes.DeletePartialMatch(labels)
}

// forgetSecretMetrics drops the series of the kubeconfig Secret key (namespace/name).
func forgetSecretMetrics(secret string) {
	secretWatchFallbacks.DeleteLabelValues(secret)
}
