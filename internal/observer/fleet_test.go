package observer_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// TestClustersComeAndGoWithoutLeaks adds 100 remote Clusters (each a kubeconfig Secret
// of a user of its own, all on the test's API server) with one Release each, waits until
// every Release is Healthy, then deletes them all: the observer's goroutines, its open
// watches of target objects and its heap return to about what they were before. A
// Cluster costs its client, cache and watches only while a Release uses it.
func TestClustersComeAndGoWithoutLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("100 Clusters on a real API server")
	}
	ctx := context.Background()
	const clusters = 100
	ns, objects := namespace(t), namespace(t)
	must(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: objects},
		Data: map[string]string{"ready": "true"}}))
	group := "fleet:" + ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: group}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
	must(t, env.Client.Create(ctx, role))
	must(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: group},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}}}))
	must(t, env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ready", Namespace: ns},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{APIVersion: "v1", Resources: []string{"configmaps"},
			RuleExpression: "object.?data.?ready.orValue('') == 'true'"}}},
	}))
	replica(t, ns, options(nil))
	ha := &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{}}
	add := func(prefix string, n int) {
		for i := range n {
			name := fmt.Sprintf("%s%d", prefix, i)
			kubeconfig, err := env.UserKubeconfig(ns+"-"+name, group)
			must(t, err)
			must(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Data: map[string][]byte{"kubeconfig": kubeconfig}}))
			cluster(t, ns, name, "", &v1alpha1.SecretKeyReference{Name: name, Key: "kubeconfig"})
			release(t, ns, name, name, ha)
			inventory(t, ns, name, objects)
		}
		for i := range n {
			waitReason(t, ns, fmt.Sprintf("%s%d", prefix, i), v1alpha1.ReasonHealthy)
		}
	}
	remove := func(prefix string, n int) {
		for i := range n {
			name := fmt.Sprintf("%s%d", prefix, i)
			meta := metav1.ObjectMeta{Name: name, Namespace: ns}
			must(t, client.IgnoreNotFound(env.Client.Delete(ctx, &v1alpha1.Release{ObjectMeta: meta})))
			must(t, client.IgnoreNotFound(env.Client.Delete(ctx, &v1alpha1.Cluster{ObjectMeta: meta})))
			must(t, client.IgnoreNotFound(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: meta})))
		}
	}
	// The baseline: the observer after a first small fleet came and went (its workers,
	// pools and caches of the management cluster are all started by then).
	watches0 := openWatches(t, "configmaps") // others' (the API server's own)
	add("warm", 3)
	remove("warm", 3)
	eventually(t, "the warm-up Clusters' watches to close", func() bool { return openWatches(t, "configmaps") == watches0 })
	time.Sleep(2 * closeIdleAfter)
	g0, heap0 := goroutines(), liveHeap()

	// Three rounds of 100 Clusters, each added and then deleted. After each round their
	// watches are closed and their goroutines have ended (a few of the process's own may
	// come and go); the live heap after the third round is about the live heap after the
	// second. The first two rounds leave the runtime's and the process's bounded share
	// behind (pools, interned strings, HTTP/2 buffers: 15 MiB, then 5 MiB more, then under
	// 1 MiB, under 3 KiB per Cluster), which a per-Cluster leak would add to again in
	// every round: a third round that leaves leakBound per Cluster or more fails.
	const leakBound = 20 << 10
	var heapAfter []uint64
	for round, prefix := range []string{"c", "d", "e"} {
		add(prefix, clusters)
		g1, heap1, watches1 := goroutines(), liveHeap(), openWatches(t, "configmaps")
		t.Logf("round %d: before: %d goroutines, live heap %d KiB, %v watches; with %d Clusters: %d goroutines (%.1f per Cluster), live heap %d KiB (%d KiB per Cluster), %v watches",
			round+1, g0, heap0>>10, watches0, clusters, g1, float64(g1-g0)/clusters, heap1>>10, (int64(heap1)-int64(heap0))/clusters>>10, watches1)
		if watches1-watches0 != clusters {
			t.Errorf("%v watches of configmaps opened for %d Clusters, want one each (one namespace each)", watches1-watches0, clusters)
		}
		remove(prefix, clusters)
		var g2 int
		var watches2 float64
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			g2, watches2 = goroutines(), openWatches(t, "configmaps")
			return watches2 <= watches0 && g2 <= g0+10, nil
		})
		time.Sleep(2 * closeIdleAfter)
		heap2 := liveHeap()
		heapAfter = append(heapAfter, heap2)
		t.Logf("round %d: after deleting them: %d goroutines, live heap %d KiB, %v watches", round+1, g2, heap2>>10, watches2)
		if err != nil {
			var dump bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
			t.Fatalf("round %d: after the Clusters went: %d goroutines (%d before), %v watches (%v before): something stayed behind; goroutines:\n%s",
				round+1, g2, g0, watches2, watches0, dump.String())
		}
		if round == 2 && heap2 > heapAfter[1]+clusters*leakBound {
			t.Errorf("live heap after the third round %d KiB, after the second %d KiB: %d Clusters that came and went left %d KiB behind",
				heap2>>10, heapAfter[1]>>10, clusters, (heap2-heapAfter[1])>>10)
		}
	}
}

// closeIdleAfter is the clustercache's: a stopped Cluster's idle connections are closed
// again this long after its clients stopped.
const closeIdleAfter = 3 * time.Second

func goroutines() int { return runtime.NumGoroutine() }

// liveHeap is the bytes of heap objects after a garbage collection: what the process
// keeps, without the spans that the objects left partly filled (HeapInuse counts those,
// and they depend on how the allocations fell, not on what is kept).
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// openWatches reads how many watches of resource the API server has open
// (apiserver_longrunning_requests{verb="WATCH"}).
func openWatches(t *testing.T, resource string) float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	must(t, err)
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	must(t, err)
	n := 0.0
	for _, m := range fams["apiserver_longrunning_requests"].GetMetric() {
		verb, res := "", ""
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				verb = l.GetValue()
			case "resource":
				res = l.GetValue()
			}
		}
		if verb == "WATCH" && res == resource {
			n += m.GetGauge().GetValue()
		}
	}
	return n
}
