package healthloop

import (
	"testing"
)

// TestUnjudgedEntriesGauge: convoy_observer_release_unjudged_entries counts the entries
// that no selected rule judges (here a Secret and a Service, next to a judged
// ConfigMap), whatever their state; a Release that asks for no assessment and a
// deleted Release leave no series.
func TestUnjudgedEntriesGauge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.secret("s", map[string][]byte{"k": []byte("v")})
	f.inventory(cm("a", 0, ""),
		cmEntry{version: "v1", kind: "Secret", resource: "secrets", name: "s"},
		cmEntry{version: "v1", kind: "Service", resource: "services", name: "missing"})
	f.pass()
	if got, _ := releaseSeries.unjudgedOf(f.ns, f.rel); got != 2 {
		t.Fatalf("unjudged gauge = %v, want 2 (the Secret and the Service)", got)
	}

	rel := f.getRelease()
	rel.Spec.HealthAssessment = nil
	must(t, env.Client.Update(f.ctx, rel))
	f.pass()
	if _, ok := releaseSeries.unjudgedOf(f.ns, f.rel); ok {
		t.Fatal("a Release without spec.healthAssessment kept its unjudged series")
	}

	rel = f.getRelease()
	rel.Spec.HealthAssessment = localRules(0)
	must(t, env.Client.Update(f.ctx, rel))
	f.pass()
	if got, _ := releaseSeries.unjudgedOf(f.ns, f.rel); got != 2 {
		t.Fatalf("unjudged gauge = %v after re-enabling the assessment, want 2", got)
	}
	must(t, env.Client.Delete(f.ctx, f.getRelease()))
	f.pass()
	if _, ok := releaseSeries.unjudgedOf(f.ns, f.rel); ok {
		t.Fatal("the unjudged series of a deleted Release was left behind")
	}
}
