package healthloop

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// releaseGauges are the per-Release gauges convoy_observer_release_entries and
// convoy_observer_release_unjudged_entries. They hold one small value per Release and
// make the series when scraped (as kube-state-metrics does), instead of keeping five
// series objects per Release in a GaugeVec (about 2 KiB per Release: 20 MiB at 10,000).
// The series and their labels are those of the GaugeVecs they replace.
type releaseGauges struct {
	entries, unjudged *prometheus.Desc

	mu     sync.Mutex
	values map[types.NamespacedName]*releaseValues
}

// releaseValues are one Release's gauges; has* says which series exist.
type releaseValues struct {
	healthy, progressing, degraded, unknown int32
	unjudged                                int32
	hasEntries, hasUnjudged                 bool
}

func newReleaseGauges() *releaseGauges {
	return &releaseGauges{
		entries: prometheus.NewDesc("convoy_observer_release_entries",
			"Inventory entries of a Release by health state, as last written to its healthSummary.",
			[]string{"namespace", "release", "state"}, nil),
		unjudged: prometheus.NewDesc("convoy_observer_release_unjudged_entries",
			"Inventory entries of a Release with spec.healthAssessment that no selected rule judges (no rule's apiVersion and resources match them, so they pass unjudged), as of its last assessment.",
			[]string{"namespace", "release"}, nil),
		values: map[types.NamespacedName]*releaseValues{},
	}
}

// Describe implements prometheus.Collector.
func (g *releaseGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.entries
	ch <- g.unjudged
}

// Collect implements prometheus.Collector: the series of every Release that has some,
// from a copy of the values (a scrape does not hold up the passes that update them).
func (g *releaseGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	values := make(map[types.NamespacedName]releaseValues, len(g.values))
	for k, v := range g.values {
		values[k] = *v
	}
	g.mu.Unlock()
	for k, v := range values {
		if v.hasEntries {
			for state, n := range map[v1alpha1.HealthState]int32{
				v1alpha1.StateHealthy: v.healthy, v1alpha1.StateProgressing: v.progressing,
				v1alpha1.StateDegraded: v.degraded, v1alpha1.StateUnknown: v.unknown,
			} {
				ch <- prometheus.MustNewConstMetric(g.entries, prometheus.GaugeValue, float64(n), k.Namespace, k.Name, string(state))
			}
		}
		if v.hasUnjudged {
			ch <- prometheus.MustNewConstMetric(g.unjudged, prometheus.GaugeValue, float64(v.unjudged), k.Namespace, k.Name)
		}
	}
}

// update changes the values of the Release namespace/name with fn; a Release left
// without series is dropped.
func (g *releaseGauges) update(namespace, name string, fn func(v *releaseValues)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := types.NamespacedName{Namespace: namespace, Name: name}
	v := g.values[k]
	if v == nil {
		v = &releaseValues{}
	}
	fn(v)
	if !v.hasEntries && !v.hasUnjudged {
		delete(g.values, k)
		return
	}
	g.values[k] = v
}

// entriesOf returns the entries gauge of a Release in state; ok is false when the
// series does not exist (tests).
func (g *releaseGauges) entriesOf(namespace, name string, state v1alpha1.HealthState) (n float64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.values[types.NamespacedName{Namespace: namespace, Name: name}]
	if v == nil || !v.hasEntries {
		return 0, false
	}
	return float64(map[v1alpha1.HealthState]int32{v1alpha1.StateHealthy: v.healthy, v1alpha1.StateProgressing: v.progressing,
		v1alpha1.StateDegraded: v.degraded, v1alpha1.StateUnknown: v.unknown}[state]), true
}

// unjudgedOf returns the unjudged gauge of a Release; ok is false when the series does
// not exist (tests).
func (g *releaseGauges) unjudgedOf(namespace, name string) (n float64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.values[types.NamespacedName{Namespace: namespace, Name: name}]
	if v == nil || !v.hasUnjudged {
		return 0, false
	}
	return float64(v.unjudged), true
}
