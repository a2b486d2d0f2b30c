package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// cmManager is the field manager of the stand-in controller-manager.
const cmManager = "convoy-controller-manager"

// stageTimeout bounds each stage of the scenario; a stage that does not finish in time
// means an edge or a state was lost.
const stageTimeout = 2 * time.Minute

// setupNamespace creates ns with the rule set and the local Cluster of a round.
func setupNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	must(t, kube().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, kube().Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns}}))
	must(t, kube().Create(ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rules", Namespace: ns},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{
			APIVersion: "v1", Resources: []string{"configmaps"},
			RuleExpression:    "object.?data.?ready.orValue('') == 'true'",
			MessageExpression: "'not ready'",
		}}},
	}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// release is the stand-in controller-manager's view of one Release of a round, and the
// invariant checker's memory of what it saw.
type release struct {
	ns, name string
	api      *syncAPI
	cluster  string        // the Cluster of the Release
	tc       client.Client // the target cluster's client; nil: the management cluster's
	rollsOut bool          // the target's controllers run the hook Jobs (targetCluster.rollsOut)

	mu         sync.Mutex
	violations []string
	anchors    map[string]time.Time // entry → the first firstUnhealthy seen while failing
	hookDone   *v1alpha1.HookEntry  // the hook once it was seen finished
	dropped    bool                 // entry b was seen gone after its drop
	finished   time.Time            // when the scenario completed
	states     map[string]string    // entry (or "Healthy") → the state last seen
	unknowns   int                  // how many times an entry or the condition turned Unknown
	unknownWhy map[string]bool      // their messages
}

// target returns the client of the cluster where the Release's objects live.
func (r *release) target() client.Client {
	if r.tc != nil {
		return r.tc
	}
	return kube()
}

func (r *release) key() string { return r.ns + "/" + r.name }

// retry calls f until it succeeds (the API server may be down in a fault).
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func apply(ctx context.Context, ac runtime.ApplyConfiguration, status bool) error {
	return applyIn(ctx, kube, ac, status)
}

// applyIn applies ac as the controller-manager with the client c returns.
func applyIn(ctx context.Context, c func() client.Client, ac runtime.ApplyConfiguration, status bool) error {
	return retry(ctx, func() error {
		if status {
			return c().Status().Apply(ctx, ac, client.FieldOwner(cmManager))
		}
		return c().Apply(ctx, ac, client.FieldOwner(cmManager), client.ForceOwnership)
	})
}

func (r *release) configMap(ctx context.Context, name, ready string) error {
	return applyIn(ctx, r.target, corev1ac.ConfigMap(r.name+"-"+name, r.ns).WithData(map[string]string{"ready": ready}), false)
}

// inventory records entries (name → wave) and the hook (nil: none) as the controller-manager.
func (r *release) inventory(ctx context.Context, entries map[string]int32, hook *acv1alpha1.HookEntryApplyConfiguration) error {
	ac := acv1alpha1.ReleaseInventory(r.name, r.ns)
	for name, wave := range entries {
		ac.WithEntries(acv1alpha1.InventoryEntry().WithGroup("").WithKind("ConfigMap").WithNamespace(r.ns).WithName(r.name + "-" + name).
			WithVersion("v1").WithResource("configmaps").WithWave(wave).WithRenderRef("r1"))
	}
	if hook != nil {
		ac.WithHooks(hook)
	}
	return apply(ctx, ac, false)
}

// migrateHook is the hook "migrate" of the Job name, armed at armed.
func (r *release) migrateHook(name string, armed time.Time) *acv1alpha1.HookEntryApplyConfiguration {
	return acv1alpha1.HookEntry().WithName("migrate").WithWorkloadKind("Job").WithNamespace(r.ns).WithWorkloadName(name).
		WithCreatedAt(metav1.NewTime(armed))
}

// waitFor polls cond until it holds or the stage times out.
func (r *release) waitFor(ctx context.Context, stage string, cond func(*v1alpha1.Release, *v1alpha1.ReleaseInventory) bool) error {
	ctx, cancel := context.WithTimeout(ctx, stageTimeout)
	defer cancel()
	for {
		rel, inv := &v1alpha1.Release{}, &v1alpha1.ReleaseInventory{}
		key := client.ObjectKey{Namespace: r.ns, Name: r.name}
		if kube().Get(ctx, key, rel) == nil && kube().Get(ctx, key, inv) == nil {
			r.check(rel, inv)
			if cond(rel, inv) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: stage %q did not finish in %v", r.key(), stage, stageTimeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// run drives the Release through the scenario: wave 0 turns Healthy (an edge), a hook
// Job finishes and is deleted (an edge; the state must stay), wave 1 appears Healthy (an
// edge), the hook is re-armed with a new Job, runs and finishes again (an edge), entry b
// is dropped (it must vanish for good). Each edge must be followed by a
// sync request in the sync endpoint's log.
func (r *release) run(ctx context.Context) error {
	r.anchors = map[string]time.Time{}
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: r.cluster},
			HealthAssessment: &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{}, Deadline: &metav1.Duration{Duration: time.Hour}},
			SyncPolicy:       &v1alpha1.SyncPolicy{Interval: &metav1.Duration{Duration: 5 * time.Second}}},
	}
	if err := retry(ctx, func() error {
		if err := kube().Create(ctx, rel.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	// Wave 0, failing.
	for _, n := range []string{"a", "b"} {
		if err := r.configMap(ctx, n, "false"); err != nil {
			return err
		}
	}
	if err := r.inventory(ctx, map[string]int32{"a": 0, "b": 0}, nil); err != nil {
		return err
	}
	if err := apply(ctx, acv1alpha1.Release(r.name, r.ns).WithStatus(acv1alpha1.ReleaseStatus().
		WithLastAttempted(acv1alpha1.AttemptStatus().WithRenderRef("r1"))), true); err != nil {
		return err
	}
	if err := r.waitFor(ctx, "wave 0 Progressing", func(_ *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) bool {
		a, b := entry(inv, r.name+"-a"), entry(inv, r.name+"-b")
		return a != nil && b != nil && a.State == v1alpha1.StateProgressing && b.State == v1alpha1.StateProgressing
	}); err != nil {
		return err
	}
	// Wave 0 turns Healthy: an edge.
	t1 := time.Now()
	for _, n := range []string{"a", "b"} {
		if err := r.configMap(ctx, n, "true"); err != nil {
			return err
		}
	}
	if err := r.waitFor(ctx, "wave 0 complete and synced", func(rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) bool {
		a, b := entry(inv, r.name+"-a"), entry(inv, r.name+"-b")
		return a != nil && b != nil && a.State == v1alpha1.StateHealthy && b.State == v1alpha1.StateHealthy && r.syncedSince(t1)(rel, inv)
	}); err != nil {
		return err
	}
	// A hook Job that finishes, then is deleted on success.
	job := r.job("migrate")
	if err := r.createJob(ctx, job); err != nil {
		return err
	}
	armed := time.Now().UTC().Truncate(time.Second)
	hook := r.migrateHook(job.Name, armed)
	if err := r.inventory(ctx, map[string]int32{"a": 0, "b": 0}, hook); err != nil {
		return err
	}
	time.Sleep(1100 * time.Millisecond) // finish in a later second than the arming
	t2 := time.Now()
	if err := r.completeJob(ctx, job); err != nil {
		return err
	}
	if err := r.waitFor(ctx, "hook finished and synced", func(rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) bool {
		return len(inv.Hooks) == 1 && inv.Hooks[0].State == v1alpha1.HookSucceeded && r.syncedSince(t2)(rel, inv)
	}); err != nil {
		return err
	}
	if err := retry(ctx, func() error {
		return client.IgnoreNotFound(r.target().Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	}); err != nil {
		return err
	}
	// Wave 1 appears Healthy: the frontier wave completes, an edge.
	if err := r.configMap(ctx, "c", "true"); err != nil {
		return err
	}
	t3 := time.Now()
	if err := r.inventory(ctx, map[string]int32{"a": 0, "b": 0, "c": 1}, hook); err != nil {
		return err
	}
	if err := r.waitFor(ctx, "wave 1 complete and synced", func(rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) bool {
		c := entry(inv, r.name+"-c")
		return c != nil && c.State == v1alpha1.StateHealthy && r.syncedSince(t3)(rel, inv)
	}); err != nil {
		return err
	}
	// The hook is re-armed with a new Job and a newer createdAt: it is polled again and
	// runs, and its new outcome is an edge.
	job = r.job("migrate-2")
	if err := r.createJob(ctx, job); err != nil {
		return err
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond))) // a later second than the first finishedAt
	rearmed := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	hook = r.migrateHook(job.Name, rearmed.Time)
	if err := r.inventory(ctx, map[string]int32{"a": 0, "b": 0, "c": 1}, hook); err != nil {
		return err
	}
	if err := r.waitFor(ctx, "re-armed hook polled again (Running)", func(_ *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) bool {
		return len(inv.Hooks) == 1 && inv.Hooks[0].CreatedAt.Equal(&rearmed) && inv.Hooks[0].State == v1alpha1.HookRunning
	}); err != nil {
		return err
	}
	time.Sleep(1100 * time.Millisecond)
	t4 := time.Now()
	if err := r.completeJob(ctx, job); err != nil {
		return err
	}
	if err := r.waitFor(ctx, "re-armed hook finished and synced", func(rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) bool {
		return len(inv.Hooks) == 1 && inv.Hooks[0].CreatedAt.Equal(&rearmed) && inv.Hooks[0].State == v1alpha1.HookSucceeded && r.syncedSince(t4)(rel, inv)
	}); err != nil {
		return err
	}
	// Entry b is dropped: it vanishes for good, and the Release is Healthy with 2 entries.
	if err := r.inventory(ctx, map[string]int32{"a": 0, "c": 1}, hook); err != nil {
		return err
	}
	if err := r.waitFor(ctx, "b dropped, Healthy", func(rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) bool {
		if entry(inv, r.name+"-b") != nil {
			return false
		}
		r.mu.Lock()
		r.dropped = true
		r.mu.Unlock()
		s := rel.Status.HealthSummary
		return healthyCond(rel) && s != nil && s.Total == 2 && s.Healthy == 2 &&
			len(inv.Hooks) == 1 && inv.Hooks[0].State == v1alpha1.HookSucceeded
	}); err != nil {
		return err
	}
	r.mu.Lock()
	r.finished = time.Now()
	r.mu.Unlock()
	return nil
}
