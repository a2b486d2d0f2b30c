package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

func (r *release) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

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

func apply(ctx context.Context, u map[string]any, status bool) error {
	return applyIn(ctx, kube, u, status)
}

// applyIn applies u as the controller-manager with the client c returns.
func applyIn(ctx context.Context, c func() client.Client, u map[string]any, status bool) error {
	obj := &unstructured.Unstructured{Object: u}
	return retry(ctx, func() error {
		if status {
			return c().Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner(cmManager))
		}
		return c().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner(cmManager), client.ForceOwnership)
	})
}

func (r *release) configMap(ctx context.Context, name, ready string) error {
	return applyIn(ctx, r.target, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": r.name + "-" + name, "namespace": r.ns}, "data": map[string]any{"ready": ready}}, false)
}

// inventory records entries (name → wave) and the hook (nil: none) as the controller-manager.
func (r *release) inventory(ctx context.Context, entries map[string]int64, hook map[string]any) error {
	list := []any{}
	for name, wave := range entries {
		list = append(list, map[string]any{"group": "", "kind": "ConfigMap", "namespace": r.ns, "name": r.name + "-" + name,
			"version": "v1", "resource": "configmaps", "wave": wave, "renderRef": "r1"})
	}
	hooks := []any{}
	if hook != nil {
		hooks = append(hooks, hook)
	}
	return apply(ctx, map[string]any{"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "ReleaseInventory",
		"metadata": map[string]any{"name": r.name, "namespace": r.ns}, "entries": list, "hooks": hooks}, false)
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

func entry(inv *v1alpha1.ReleaseInventory, name string) *v1alpha1.InventoryEntry {
	for i := range inv.Entries {
		if inv.Entries[i].Name == name {
			return &inv.Entries[i]
		}
	}
	return nil
}

func healthyCond(rel *v1alpha1.Release) bool {
	c := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonHealthy
}

// check records every invariant that inv breaks: a moved anchor, a Degraded entry (the
// deadline is an hour), an Unknown entry whose message is not a read error (every object
// of the scenario exists while it is recorded), a finished hook that lost its state, a
// revived dropped entry. It counts the turns to Unknown of entries and of the Healthy
// condition.
func (r *release) check(rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.states == nil {
		r.states, r.unknownWhy = map[string]string{}, map[string]bool{}
	}
	if c := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy); c != nil {
		// Pending (the controller-manager has not recorded the render yet) is the
		// scenario's start, not a fault's mark.
		state := string(c.Status) + "/" + c.Reason
		if c.Status == metav1.ConditionUnknown && c.Reason != v1alpha1.ReasonPending && r.states["Healthy"] != state {
			r.unknowns++
			r.unknownWhy["Healthy: "+c.Reason+": "+c.Message] = true
		}
		r.states["Healthy"] = state
	}
	for _, e := range inv.Entries {
		if e.State == v1alpha1.StateUnknown {
			if r.states[e.Name] != string(e.State) {
				r.unknowns++
				r.unknownWhy["entry: "+e.Message] = true
			}
			if !strings.HasPrefix(e.Message, "cannot read object: ") {
				r.violations = append(r.violations, fmt.Sprintf("%s: entry %s Unknown with %q: a fault made an existing object look gone or wrong", r.key(), e.Name, e.Message))
			}
		}
		r.states[e.Name] = string(e.State)
		if e.State == v1alpha1.StateDegraded {
			r.violations = append(r.violations, fmt.Sprintf("%s: entry %s Degraded before its 1h deadline", r.key(), e.Name))
		}
		if e.State == v1alpha1.StateHealthy || e.FirstUnhealthy == nil {
			continue
		}
		if first, ok := r.anchors[e.Name]; ok && !first.Equal(e.FirstUnhealthy.Time) {
			r.violations = append(r.violations, fmt.Sprintf("%s: anchor of %s moved from %v to %v", r.key(), e.Name, first, e.FirstUnhealthy.Time))
		} else if !ok {
			r.anchors[e.Name] = e.FirstUnhealthy.Time
		}
	}
	for i := range inv.Hooks {
		h := inv.Hooks[i]
		// The state and message must stay; finishedAt may move once to a later second
		// when the hook finished in its arming second (it may have been re-armed).
		if r.hookDone != nil && (h.State != r.hookDone.State || h.Message != r.hookDone.Message || h.FinishedAt == nil) &&
			h.CreatedAt.Equal(r.hookDone.CreatedAt) {
			r.violations = append(r.violations, fmt.Sprintf("%s: finished hook %s (createdAt %v) changed from %s to %s (createdAt %v)", r.key(), h.Name, r.hookDone.CreatedAt, r.hookDone.State, h.State, h.CreatedAt))
		}
		// An outcome belongs to the arming it finished after: right after a re-arm, the
		// previous outcome (finishedAt before the new createdAt) is still shown until
		// the observer polls the new workload.
		finished := h.State.IsTerminal() && h.FinishedAt != nil && h.CreatedAt != nil && !h.FinishedAt.Before(h.CreatedAt)
		if finished && (r.hookDone == nil || !h.CreatedAt.Equal(r.hookDone.CreatedAt)) {
			r.hookDone = h.DeepCopy() // finished, or finished again after a re-arm
		}
	}
	if r.dropped && entry(inv, r.name+"-b") != nil {
		r.violations = append(r.violations, fmt.Sprintf("%s: dropped entry b revived", r.key()))
	}
}

// syncedSince waits for a sync request served at or after t.
func (r *release) syncedSince(t time.Time) func(*v1alpha1.Release, *v1alpha1.ReleaseInventory) bool {
	return func(*v1alpha1.Release, *v1alpha1.ReleaseInventory) bool { return r.api.since(r.key(), t) > 0 }
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
	if err := r.inventory(ctx, map[string]int64{"a": 0, "b": 0}, nil); err != nil {
		return err
	}
	if err := apply(ctx, map[string]any{"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "Release",
		"metadata": map[string]any{"name": r.name, "namespace": r.ns},
		"status":   map[string]any{"lastAttempted": map[string]any{"renderRef": "r1"}}}, true); err != nil {
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
	hook := map[string]any{"name": "migrate", "workloadKind": "Job", "namespace": r.ns, "workloadName": job.Name, "createdAt": armed.Format(time.RFC3339)}
	if err := r.inventory(ctx, map[string]int64{"a": 0, "b": 0}, hook); err != nil {
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
	if err := r.inventory(ctx, map[string]int64{"a": 0, "b": 0, "c": 1}, hook); err != nil {
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
	hook = map[string]any{"name": "migrate", "workloadKind": "Job", "namespace": r.ns, "workloadName": job.Name, "createdAt": rearmed.Format(time.RFC3339)}
	if err := r.inventory(ctx, map[string]int64{"a": 0, "b": 0, "c": 1}, hook); err != nil {
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
	if err := r.inventory(ctx, map[string]int64{"a": 0, "c": 1}, hook); err != nil {
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

// job returns the hook Job name of the Release. Where the target's controllers run it,
// it is created suspended, so that the test chooses when it runs (completeJob).
func (r *release) job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: r.name + "-" + name, Namespace: r.ns},
		Spec: batchv1.JobSpec{Suspend: &r.rollsOut, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
}

// createJob creates job in the target cluster.
func (r *release) createJob(ctx context.Context, job *batchv1.Job) error {
	return retry(ctx, func() error {
		if err := r.target().Create(ctx, job.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
}

// completeJob lets the target's controllers run job (it resumes it: the Job controller
// creates its Pod, the scheduler binds it to a fake node, kwok runs it to Succeeded and
// the Job controller marks the Job Complete), or, without controllers, writes its status
// as the Job controller does when it succeeded.
func (r *release) completeJob(ctx context.Context, job *batchv1.Job) error {
	if r.rollsOut {
		return retry(ctx, func() error {
			return r.target().Patch(ctx, job.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`)))
		})
	}
	return retry(ctx, func() error {
		j := &batchv1.Job{}
		if err := r.target().Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: "SuccessCriteriaMet", Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now},
		}
		return r.target().Status().Update(ctx, j)
	})
}
