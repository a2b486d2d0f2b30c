package apiserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// explainedRelease creates in ns the Release name on Cluster cluster, selecting a
// HealthRuleSet whose rule 0 wants ConfigMaps with data.ready == "true", the ConfigMap
// name (ready false) and an inventory in which the observer recorded the entry as
// Degraded, decided by rule 0 of that set with the cause DeadlinePassed and one rule
// applied. The Release has no deadline, so re-evaluating the rule could never give that
// cause: only the inventory can.
func explainedRelease(t *testing.T, ns, name, cluster string) {
	t.Helper()
	ctx := context.Background()
	must(t, env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"rules": name}},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
			{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "object.data.ready == 'true'"},
		}},
	}))
	must(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"ready": "false"}}))
	must(t, env.Client.Create(ctx, &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: cluster},
			HealthAssessment: &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rules": name}}}},
	}))
	key := func() *acv1alpha1.InventoryEntryApplyConfiguration {
		return acv1alpha1.InventoryEntry().WithGroup("").WithKind("ConfigMap").WithNamespace(ns).WithName(name)
	}
	for manager, e := range map[string]*acv1alpha1.InventoryEntryApplyConfiguration{
		"convoy-controller-manager": key().WithVersion("v1").WithResource("configmaps").WithWave(0).WithRenderRef("r1"),
		"convoy-health-inventory": key().WithState(v1alpha1.StateDegraded).WithAssessedRenderRef("r1").WithMessage("not ready").
			WithRulesApplied(1).WithDecidedBy(acv1alpha1.EntryDecider().WithKind("HealthRuleSet").WithNamespace(ns).WithName(name).
			WithRule(0).WithCause("DeadlinePassed")),
	} {
		ac := acv1alpha1.ReleaseInventory(name, ns).WithEntries(e)
		must(t, env.Client.Apply(ctx, ac, client.FieldOwner(manager), client.ForceOwnership))
	}
}

// TestHealthExplainedThroughTheAggregator: convoy-api, with exactly the RBAC of
// config/rbac (no grant on Clusters, Secrets, rule sets or target objects), answers in
// /health the rule that the observer recorded for an entry, whether the Release's
// Cluster has a kubeconfig Secret or is the local cluster: it reads neither.
func TestHealthExplainedThroughTheAggregator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := tenant(t, "explain")
	kc, err := env.AdminKubeconfig()
	must(t, err)
	must(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: ns}, Data: map[string][]byte{"value": kc}}))
	must(t, env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: ns},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "remote"}}}))
	must(t, env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns}}))
	explainedRelease(t, ns, "remote-web", "remote")
	explainedRelease(t, ns, "local-web", "local")
	cfg, err := env.AddUser("erin")
	must(t, err)
	bind(t, ns, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "erin"})
	erin := syncapiclient.NewClient(cfg)

	for _, name := range []string{"remote-web", "local-web"} {
		var h *syncapi.HealthResult
		eventually(t, 10*time.Second, func() error { // RBAC and the informers settle
			if h, err = erin.Health(ctx, ns, name); err != nil {
				return err
			}
			if len(h.Entries) != 1 || h.Entries[0].DecidedBy == nil {
				return fmt.Errorf("%s: %+v", name, h)
			}
			return nil
		})
		e := h.Entries[0]
		if d := e.DecidedBy; d.Kind != "HealthRuleSet" || d.Namespace != ns || d.Name != name || d.Rule != 0 || d.Cause != "DeadlinePassed" {
			t.Errorf("%s: decidedBy %+v; want the recorded rule 0 of HealthRuleSet/%s/%s, DeadlinePassed", name, *d, ns, name)
		}
		if e.RulesApplied == nil || *e.RulesApplied != 1 || h.DecidedByError != "" {
			t.Errorf("%s: rulesApplied %v, decidedByError %q; want the recorded 1 and none", name, e.RulesApplied, h.DecidedByError)
		}
	}
}
