package healthloop

import (
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func newGate(shards ...string) *ShardGate { return NewShardGate(shards) }

// secret creates or replaces the Secret name with data.
func (f *fixture) secret(name string, data map[string][]byte) {
	f.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Data: data}
	err := env.Client.Create(f.ctx, s)
	if apierrors.IsAlreadyExists(err) {
		cur := &corev1.Secret{}
		must(f.t, env.Client.Get(f.ctx, clientKey(f.ns, name), cur))
		cur.Data = data
		err = env.Client.Update(f.ctx, cur)
	}
	must(f.t, err)
}

func deleteRuleSet(t interface {
	Helper()
	Fatal(...any)
}, f *fixture, name string) {
	t.Helper()
	rs := &extv1alpha1.HealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}}
	if err := env.Client.Delete(f.ctx, rs); err != nil {
		t.Fatal(err)
	}
}

func testLogger() logr.Logger { return logr.Discard() }

// readyRelease creates the HealthRuleSet "rules" (a ConfigMap passes when data.ready is
// "true") and a Release selecting it, with a deadline and an interval (0: none).
func (f *fixture) readyRelease(deadline, interval time.Duration) {
	f.t.Helper()
	f.configMapRules("rules", readyRule)
	f.release(localRules(deadline), interval)
}

// oneConfigMap sets up the commonest Release: readyRelease(0, 0) and an inventory of one
// entry, the ConfigMap "a" with data.ready = ready.
func (f *fixture) oneConfigMap(ready string) {
	f.t.Helper()
	f.readyRelease(0, 0)
	f.configMap("a", ready)
	f.inventory(cm("a", 0, ""))
}

// passHealthy runs a pass and expects the Release Healthy (True, reason Healthy).
func (f *fixture) passHealthy() {
	f.t.Helper()
	f.pass()
	f.expectCondition(metav1.ConditionTrue, v1alpha1.ReasonHealthy)
}

// setShard moves the fixture's Cluster to shard and returns it.
func (f *fixture) setShard(shard string) *v1alpha1.Cluster {
	f.t.Helper()
	cl := &v1alpha1.Cluster{}
	must(f.t, env.Client.Get(f.ctx, clientKey(f.ns, "target"), cl))
	cl.Spec.Shard = shard
	must(f.t, env.Client.Update(f.ctx, cl))
	return cl
}

// complete returns the conditions of a Job that completed, in the order the Job
// controller sets them.
func complete(message string) []batchv1.JobCondition {
	return []batchv1.JobCondition{cond("SuccessCriteriaMet", "CompletionsReached", ""), cond(batchv1.JobComplete, "CompletionsReached", message)}
}
