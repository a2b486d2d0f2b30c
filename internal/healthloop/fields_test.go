package healthloop

import (
	"testing"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// TestRulesThatReadMoreAreServed: the watch-fed cache keeps only what the rules read
// (data.ready of the ConfigMap, not data.zone); when the rule set changes to read
// data.zone, the next pass makes the cache list again before it reads, so the new rule
// sees the field and the Release stays Healthy.
func TestRulesThatReadMoreAreServed(t *testing.T) {
	f := newFixture(t)
	cache, _ := f.watching()
	f.configMapRules("rules", readyRule)
	must(t, env.Client.Apply(f.ctx, corev1ac.ConfigMap("a", f.ns).WithData(map[string]string{"ready": "true", "zone": "eu"}),
		client.FieldOwner("test"), client.ForceOwnership))
	f.release(localRules(0), 0)
	f.inventory(cm("a", 0, ""))
	f.passHealthy()
	zone := health.FieldsOf(nil, []extv1alpha1.HealthRuleSet{{Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
		{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "object.data.zone == 'eu'"}}}}}).For("v1", "configmaps")
	if kept, ok := cache.RuleFields(); !ok || kept.For("v1", "configmaps").Covers(zone) {
		t.Fatalf("the cache keeps %s of ConfigMaps (set: %v): want data.ready, not data.zone", kept.For("v1", "configmaps"), ok)
	}

	rs := &extv1alpha1.HealthRuleSet{}
	must(t, env.Client.Get(f.ctx, clientKey(f.ns, "rules"), rs))
	rs.Spec.Rules[0].RuleExpression = "object.data.zone == 'eu'"
	rs.Spec.Rules[0].MessageExpression = "'zone=' + object.data.zone"
	must(t, env.Client.Update(f.ctx, rs))
	f.passHealthy()
	if kept, _ := cache.RuleFields(); !kept.For("v1", "configmaps").Covers(zone) {
		t.Fatalf("after the change the cache keeps %s of ConfigMaps: want data.zone", kept.For("v1", "configmaps"))
	}
}
