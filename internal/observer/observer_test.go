package observer_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/observer"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// writes counts one replica's status writes per Release name.
type writes struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *writes) get(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[name]
}

func (w *writes) wrap(c client.Client) client.Client { return countingClient{Client: c, w: w} }

// countingClient counts successful status applies per Release name.
type countingClient struct {
	client.Client
	w *writes
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), w: c.w}
}

type countingStatus struct {
	client.SubResourceWriter
	w *writes
}

func (s countingStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	err := s.SubResourceWriter.Apply(ctx, obj, opts...)
	// The loop applies typed apply configurations (GetName() *string).
	if u, ok := obj.(interface{ GetName() *string }); ok && err == nil && u.GetName() != nil {
		s.w.mu.Lock()
		s.w.n[*u.GetName()]++
		s.w.mu.Unlock()
	}
	return err
}

// options returns the flags' defaults (without the probe listener, so that replicas
// run side by side) changed by set.
func options(set func(o *observer.Options)) observer.Options {
	o := observer.NewOptions()
	o.Serving.ProbeAddr = "0"
	if set != nil {
		set(o)
	}
	return *o
}

// replica starts an observer replica and returns its write counter and a stop func.
func replica(t *testing.T, ns string, o observer.Options) (*writes, func()) {
	w, stop, _ := replicaWithManager(t, ns, o)
	return w, stop
}

func replicaWithManager(t *testing.T, ns string, o observer.Options) (*writes, func(), manager.Manager) {
	t.Helper()
	return replicaOn(t, env.Config, ns, o)
}

// replicaOn starts a replica that reaches the management API server through cfg.
func replicaOn(t *testing.T, cfg *rest.Config, ns string, o observer.Options) (*writes, func(), manager.Manager) {
	t.Helper()
	w := &writes{n: map[string]int{}}
	o.Management.Namespaces = []string{ns}
	o.WrapWriter = w.wrap
	mgr, stop := startObserver(t, cfg, o)
	return w, stop, mgr
}

// startObserver runs an observer built from cfg and o until the test ends, and returns
// its manager and a function that stops it earlier (and waits until it stopped).
func startObserver(t *testing.T, cfg *rest.Config, o observer.Options) (manager.Manager, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := observer.New(ctx, cfg, &o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("observer (shards %v): %v", o.Management.Shards, err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return mgr, stop
}

var nsN atomic.Int32

func namespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("obs-%d", nsN.Add(1))
	must(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	return ns
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func cluster(t *testing.T, ns, name, shard string, secret *v1alpha1.SecretKeyReference) {
	t.Helper()
	must(t, env.Client.Create(context.Background(), &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.ClusterSpec{Shard: shard, KubeconfigSecretRef: secret},
	}))
}

func release(t *testing.T, ns, name, clusterName string, ha *v1alpha1.HealthAssessment) {
	t.Helper()
	must(t, env.Client.Create(context.Background(), &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: clusterName}, HealthAssessment: ha,
			SyncPolicy: &v1alpha1.SyncPolicy{Interval: &metav1.Duration{Duration: time.Second}}},
	}))
}

// condition returns the Healthy condition of Release ns/name, or nil.
func condition(t *testing.T, ns, name string) *metav1.Condition {
	t.Helper()
	rel := &v1alpha1.Release{}
	must(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rel))
	return meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy)
}

func summary(t *testing.T, ns, name string) *v1alpha1.HealthSummary {
	t.Helper()
	rel := &v1alpha1.Release{}
	must(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rel))
	return rel.Status.HealthSummary
}

// waitReason waits until Release ns/name's Healthy condition has reason.
func waitReason(t *testing.T, ns, name, reason string) *metav1.Condition {
	t.Helper()
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true,
		func(context.Context) (bool, error) {
			last = condition(t, ns, name)
			return last != nil && last.Reason == reason, nil
		})
	if err != nil {
		t.Fatalf("Release %s/%s never reached reason %s; last condition %+v", ns, name, reason, last)
	}
	return last
}

// setHealthAssessment changes a Release's spec, which adds its key on every replica.
func setHealthAssessment(t *testing.T, ns, name string, ha *v1alpha1.HealthAssessment) {
	t.Helper()
	rel := &v1alpha1.Release{}
	must(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rel))
	rel.Spec.HealthAssessment = ha
	must(t, env.Client.Update(context.Background(), rel))
}

// TestShardsSplitReleases: two replicas with different shards each write only the
// Releases of their own Clusters; moving a Cluster's shard moves the writes.
func TestShardsSplitReleases(t *testing.T) {
	ns := namespace(t)
	cluster(t, ns, "ca", "a", nil)
	cluster(t, ns, "cb", "b", nil)
	release(t, ns, "ra", "ca", nil)
	release(t, ns, "rb", "cb", nil)
	wa, _ := replica(t, ns, options(func(o *observer.Options) { o.Management.Shards = []string{"a"} }))
	wb, _, mgrB := replicaWithManager(t, ns, options(func(o *observer.Options) { o.Management.Shards = []string{"b"} }))
	waitReason(t, ns, "ra", v1alpha1.ReasonNotConfigured)
	waitReason(t, ns, "rb", v1alpha1.ReasonNotConfigured)
	eventually(t, "both writes to return", func() bool { return wa.get("ra") > 0 && wb.get("rb") > 0 })
	if wa.get("rb") != 0 || wb.get("ra") != 0 {
		t.Fatalf("a replica wrote a Release of another shard: a->rb %d, b->ra %d", wa.get("rb"), wb.get("ra"))
	}
	if wa.get("ra") == 0 || wb.get("rb") == 0 {
		t.Fatalf("writes: a->ra %d, b->rb %d", wa.get("ra"), wb.get("rb"))
	}
	// Move cb to shard a, then change rb so that it needs a new write.
	cb := &v1alpha1.Cluster{}
	must(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cb"}, cb))
	cb.Spec.Shard = "a"
	must(t, env.Client.Update(context.Background(), cb))
	before := wb.get("rb")
	// Let both replicas see the move before the spec change (the Cluster event adds rb
	// on both; a pass on b is then skipped by the gate).
	waitClusterShard(t, mgrB.GetCache(), ns, "cb", "a")
	setHealthAssessment(t, ns, "rb", &v1alpha1.HealthAssessment{})
	waitReason(t, ns, "rb", v1alpha1.ReasonHealthy)
	eventually(t, "the new owner's write to return", func() bool { return wa.get("rb") > 0 })
	if wa.get("rb") == 0 {
		t.Fatal("the new owner of shard a did not write rb")
	}
	if wb.get("rb") != before {
		t.Fatalf("replica b kept writing rb after its Cluster moved (%d -> %d)", before, wb.get("rb"))
	}
}

// waitClusterShard waits until reader (a replica's cache) sees the Cluster's shard.
func waitClusterShard(t *testing.T, reader client.Reader, ns, name, shard string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true,
		func(ctx context.Context) (bool, error) {
			c := &v1alpha1.Cluster{}
			if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
				return false, err
			}
			return c.Spec.Shard == shard, nil
		})
	must(t, err)
}

// TestLeaderElectionPerShard: two replicas of the same shard; only the leader writes, and
// when it stops the other takes over.
func TestLeaderElectionPerShard(t *testing.T) {
	ns := namespace(t)
	cluster(t, ns, "c", "", nil)
	release(t, ns, "r", "c", nil)
	le := options(func(o *observer.Options) {
		o.LeaderElection.LeaderElect, o.LeaderElection.ResourceNamespace = true, ns
		o.LeaderElection.LeaseDuration.Duration = 2 * time.Second
		o.LeaderElection.RenewDeadline.Duration = 1500 * time.Millisecond
		o.LeaderElection.RetryPeriod.Duration = 200 * time.Millisecond
	})
	w1, stop1 := replica(t, ns, le)
	w2, stop2 := replica(t, ns, le)
	waitReason(t, ns, "r", v1alpha1.ReasonNotConfigured)
	eventually(t, "the leader's write to return", func() bool { return w1.get("r")+w2.get("r") > 0 })
	if (w1.get("r") == 0) == (w2.get("r") == 0) {
		t.Fatalf("want exactly one writer, got %d and %d", w1.get("r"), w2.get("r"))
	}
	leader, follower, stopLeader := w1, w2, stop1
	if w2.get("r") > 0 {
		leader, follower, stopLeader = w2, w1, stop2
	}
	lease := &unstructuredLease{}
	must(t, lease.get(ns, observer.LeaseName(nil)))
	stopLeader()
	frozen := leader.get("r")
	setHealthAssessment(t, ns, "r", &v1alpha1.HealthAssessment{})
	waitReason(t, ns, "r", v1alpha1.ReasonHealthy)
	eventually(t, "the follower's write to return", func() bool { return follower.get("r") > 0 })
	if follower.get("r") == 0 {
		t.Fatal("the follower did not take over")
	}
	if leader.get("r") != frozen {
		t.Fatal("the stopped leader kept writing")
	}
}

// unstructuredLease reads the shard's Lease to prove leader election used it.
type unstructuredLease struct{ holder string }

func (l *unstructuredLease) get(ns, name string) error {
	lease := &coordinationLease{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, lease); err != nil {
		return fmt.Errorf("lease %s/%s: %w", ns, name, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return fmt.Errorf("lease %s/%s has no holder", ns, name)
	}
	l.holder = *lease.Spec.HolderIdentity
	return nil
}

var _ = extv1alpha1.GroupVersion

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}
