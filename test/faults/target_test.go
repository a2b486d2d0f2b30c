package faults

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/localcluster"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// targetClusterName is the Cluster of the Releases whose objects live in the separate
// target cluster.
const targetClusterName = "target"

// targetCluster is a second kube-apiserver and etcd: the cluster where the Releases'
// objects (ConfigMaps, hook Jobs) live, which the observer reaches through its own fault
// proxy, with the kubeconfig Secret of the Cluster "target". Faults injected there leave
// the observer's way to the management cluster alone.
type targetCluster struct {
	client client.Client // the test's (administrator's) client, not through the proxy
	proxy  *faultProxy
	// rollsOut: kube-controller-manager, kube-scheduler and kwok run the target's
	// workloads (internal/localcluster), so a hook Job really runs to completion on a
	// fake node; without them the test writes the Jobs' status itself.
	rollsOut bool
}

// rollOut is whether the target cluster runs real controllers: in the long form, and
// with FAULTS_ROLLOUT=1.
var rollOut = long || os.Getenv("FAULTS_ROLLOUT") != ""

// startTargetCluster starts the target cluster for the Releases of ns and records it as
// the Cluster "target" of ns in the management cluster.
func startTargetCluster(t *testing.T, ns string) *targetCluster {
	t.Helper()
	tc := &targetCluster{rollsOut: rollOut}
	var cfg *rest.Config
	if rollOut {
		assets, err := localcluster.FindAssets(env.RepoRoot)
		must(t, err)
		c, err := localcluster.Start(context.Background(), localcluster.Options{AssetsDir: assets, Dir: t.TempDir(), Scheme: env.Scheme, Nodes: 1})
		must(t, err)
		t.Cleanup(c.Stop)
		tc.client, cfg = c.Client, c.Config
	} else {
		te, err := testenv.StartTarget()
		must(t, err)
		t.Cleanup(te.Stop)
		tc.client, cfg = te.Client, te.Config
	}
	tc.proxy = newFaultProxy(t, cfg)
	ctx := context.Background()
	must(t, tc.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	kc, err := os.ReadFile(tc.proxy.kubeconfig(t))
	must(t, err)
	must(t, kube().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "target-kubeconfig", Namespace: ns},
		Data: map[string][]byte{v1alpha1.DefaultKubeconfigKey: kc}}))
	must(t, kube().Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: targetClusterName, Namespace: ns},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "target-kubeconfig"}}}))
	return tc
}

// injectTarget injects a fault between the observer and the target cluster only: one
// of the proxy's faults on 40% of the requests, or (one round in three) the target down,
// every connection dropped and every new request reset. A down target must turn every
// Release of ns Unknown (CONTRACT: a cluster that does not answer gives Healthy=Unknown,
// reason Unknown) before it comes back; the round's invariants then check that they
// return to the truth and that no entry lost its anchor or state.
func injectTarget(t *testing.T, w *world, ns string) func() time.Time {
	p := w.target.proxy
	if rand.IntN(3) != 0 {
		modes := strings.Split(proxyModeAll, ",")
		mode := modes[rand.IntN(len(modes))]
		t.Logf("target fault: %s", mode)
		p.set(mode, 0.4)
		return now(func() { p.set(modeNone, 0) })
	}
	t.Logf("target fault: down")
	p.set(modeReset, 1)
	p.dropConnections()
	downAt := time.Now()
	return now(func() {
		defer p.set(modeNone, 0)
		ctx, cancel := context.WithTimeout(context.Background(), downTimeout)
		defer cancel()
		var known []string
		for {
			list := &v1alpha1.ReleaseList{}
			known = nil
			if err := kube().List(ctx, list, client.InNamespace(ns)); err == nil {
				for _, rel := range list.Items {
					c := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy)
					if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != v1alpha1.ReasonUnknown {
						known = append(known, rel.Name)
					}
				}
				if len(list.Items) > 0 && len(known) == 0 {
					t.Logf("target down: every Release turned Unknown after %v", time.Since(downAt).Round(10*time.Millisecond))
					return
				}
			}
			select {
			case <-ctx.Done():
				t.Errorf("the target cluster was down for %v, but Releases %v never turned Healthy=Unknown (reason Unknown)", downTimeout, known)
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// downTimeout bounds the wait for the Releases of a down target to turn Unknown: the
// re-check after syncPolicy.interval (5s, with jitter) reads the target, and a read and
// the probe of the cluster each take up to --target-timeout (2s here) while client-go
// retries the resets; 16-19s in practice.
const downTimeout = 30 * time.Second
