package apiserver_test

import (
	"context"
	"fmt"
	"strings"
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
// name (ready false) and an inventory that records it as Progressing.
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
		"convoy-health-inventory":   key().WithState(v1alpha1.StateProgressing).WithAssessedRenderRef("r1").WithMessage("not ready"),
	} {
		ac := acv1alpha1.ReleaseInventory(name, ns).WithEntries(e)
		must(t, env.Client.Apply(ctx, ac, client.FieldOwner(manager), client.ForceOwnership))
	}
}

// TestHealthExplainedThroughTheAggregator: convoy-api, with exactly the RBAC of
// config/rbac, says in /health which rule decides an entry of a Release whose Cluster
// has a kubeconfig Secret (it lists the rule sets, reads the Cluster and the Secret);
// for a Cluster without one it has no grant on the local cluster's objects here (the
// optional local-cluster reader is not installed), and /health still answers, with a
// decidedByError that says so.
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

	var h *syncapi.HealthResult
	eventually(t, 10*time.Second, func() error { // RBAC and the informers settle
		if h, err = erin.Health(ctx, ns, "remote-web"); err != nil {
			return err
		}
		if len(h.Entries) != 1 || h.Entries[0].DecidedBy == nil {
			return fmt.Errorf("remote-web: %+v", h)
		}
		return nil
	})
	d := h.Entries[0].DecidedBy
	if d.Kind != "HealthRuleSet" || d.Namespace != ns || d.Name != "remote-web" || d.Rule != 0 || d.Cause != "RuleFailed" || h.DecidedByError != "" {
		t.Errorf("remote-web: decidedBy %+v, decidedByError %q; want rule 0 of HealthRuleSet/%s/remote-web, RuleFailed", *d, h.DecidedByError, ns)
	}

	eventually(t, 10*time.Second, func() error {
		if h, err = erin.Health(ctx, ns, "local-web"); err != nil {
			return err
		}
		if len(h.Entries) != 1 {
			return fmt.Errorf("local-web: %+v", h)
		}
		return nil
	})
	if h.Entries[0].DecidedBy != nil || !strings.Contains(h.DecidedByError, "forbidden") {
		t.Errorf("local-web without the local-cluster reader: decidedBy %+v, decidedByError %q; want none and a forbidden read", h.Entries[0].DecidedBy, h.DecidedByError)
	}
}
