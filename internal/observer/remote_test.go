package observer_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// TestRemoteClusterDownAndBack: objects on a target API server reached through a
// kubeconfig Secret are assessed; when that server stops, its Release turns Unknown with
// the summary kept while a Release of another cluster keeps being assessed; when it
// comes back, the loop recovers by itself.
func TestRemoteClusterDownAndBack(t *testing.T) {
	ctx := context.Background()
	target, err := testenv.StartTarget()
	must(t, err)
	t.Cleanup(target.Stop)
	kubeconfig, err := target.AdminKubeconfig()
	must(t, err)

	ns := namespace(t)
	must(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "remote-kubeconfig", Namespace: ns},
		Data: map[string][]byte{"kubeconfig": kubeconfig}}))
	cluster(t, ns, "remote", "", &v1alpha1.SecretKeyReference{Name: "remote-kubeconfig", Key: "kubeconfig"})
	cluster(t, ns, "local", "", nil)
	must(t, env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ready", Namespace: ns},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"},
			RuleExpression: "object.?data.?ready.orValue('') == 'true'"}}},
	}))
	ha := &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{}}
	release(t, ns, "on-remote", "remote", ha)
	release(t, ns, "on-local", "local", ha)
	// The remote object lives only on the target; the local one only on management.
	must(t, target.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}, Data: map[string]string{"ready": "true"}}))
	local := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string]string{"ready": "true"}}
	must(t, env.Client.Create(ctx, local))
	inventory(t, ns, "on-remote", "default")
	inventory(t, ns, "on-local", ns)

	replica(t, ns, options(nil))
	waitReason(t, ns, "on-remote", v1alpha1.ReasonHealthy)
	waitReason(t, ns, "on-local", v1alpha1.ReasonHealthy)
	kept := *summary(t, ns, "on-remote")
	if kept.Healthy != 1 || kept.Total != 1 {
		t.Fatalf("remote summary = %+v", kept)
	}

	must(t, target.StopAPIServer())
	c := waitReason(t, ns, "on-remote", v1alpha1.ReasonUnknown)
	if c.Status != metav1.ConditionUnknown {
		t.Fatalf("condition = %+v", c)
	}
	if got := summary(t, ns, "on-remote"); got == nil || *got != kept {
		t.Fatalf("summary not kept while the cluster is down: %+v", got)
	}
	// The other cluster's Release keeps being assessed meanwhile.
	local.Data["ready"] = "false"
	must(t, env.Client.Update(ctx, local))
	waitReason(t, ns, "on-local", v1alpha1.ReasonProgressing)

	// envtest's kube-apiserver comes back on the same address with new certificates, so
	// the credentials are rotated too: the Secret's change rebuilds the client.
	must(t, target.StartAPIServer())
	kubeconfig, err = target.AdminKubeconfig()
	must(t, err)
	secret := &corev1.Secret{}
	must(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "remote-kubeconfig"}, secret))
	secret.Data["kubeconfig"] = kubeconfig
	must(t, env.Client.Update(ctx, secret))
	waitReason(t, ns, "on-remote", v1alpha1.ReasonHealthy)
}

func inventory(t *testing.T, ns, name, objectNamespace string) {
	t.Helper()
	inv := &v1alpha1.ReleaseInventory{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Entries: []v1alpha1.InventoryEntry{{Kind: "ConfigMap", Namespace: objectNamespace, Name: "app",
			Version: "v1", Resource: "configmaps"}},
	}
	must(t, env.Client.Create(context.Background(), inv, client.FieldOwner("convoy-controller-manager")))
}
