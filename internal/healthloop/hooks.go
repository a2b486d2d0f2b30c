package healthloop

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// hookOutcome is the hooks' part of a pass's decision (decideHooks).
type hookOutcome struct {
	// finished counts the hooks that reached a terminal state in this pass.
	finished int
	// running names the hooks whose state is Running after this pass.
	running []string
	// status is the hooks list that writeHookStatus applies; nil when nothing changed.
	status []*acv1alpha1.HookEntryApplyConfiguration
	// terminal are the hooks whose run ended in this pass, for their Events: polled to
	// Succeeded or Failed from another state, from no finishedAt, or after a re-arm.
	terminal []finishedHook
}

// finishedHook is a hook whose run ended in this pass, with why.
type finishedHook struct {
	v1alpha1.HookEntry
	// timedOut: Failed because its timeout passed, not because of its workload.
	timedOut bool
	// rearmed: the hook had finished before and was re-armed.
	rearmed bool
}

func (o hookOutcome) pendingTargets() []string {
	out := make([]string, 0, len(o.running))
	for _, n := range o.running {
		out = append(out, targetHook(n))
	}
	return out
}

var (
	gvrJobs = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	gvrPods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// hookWorkloadGVR is the resource of a hook's workloadKind: Job or Pod; ok is false for
// any other kind.
func hookWorkloadGVR(kind string) (gvr schema.GroupVersionResource, ok bool) {
	switch kind {
	case "Job":
		return gvrJobs, true
	case "Pod":
		return gvrPods, true
	}
	return schema.GroupVersionResource{}, false
}

// hookObservation is what a pass read of its hooks (observeHooks): the hooks the
// controller-manager records, whether the observer still owns one it dropped, and the
// read of the workload of each hook that needsPoll.
type hookObservation struct {
	own   *inventory.Ownership
	hooks []v1alpha1.HookEntry
	stale bool
	// reads holds, by the index of the hook in hooks, the read of its workload; a hook
	// that needsPoll and has none was not read (its kind or reference is refused).
	reads map[int]workloadRead
	// unreadable is the error that kept every workload from being read (the cluster is
	// missing or not connected): the polled hooks keep their state.
	unreadable error
}

// workloadRead is one read of a hook's workload.
type workloadRead struct {
	obj *unstructured.Unstructured
	// notFound: the workload is gone. err: a read error other than NotFound (the hook
	// keeps its state).
	notFound bool
	err      error
	// at is when the read returned: the finishedAt of a workload that finished. The time
	// of the observation, not of the pass's start: a workload that finished during the
	// read must not get a finishedAt before it finished (and in its arming second, which
	// would make it look re-armed).
	at time.Time
}

// observeHooks reads, from the target, the workload of every hook of the pass's
// inventory that needsPoll: a workloadName, and either no finishedAt or a createdAt after
// its finishedAt (the controller-manager re-armed it). It decides nothing (decideHooks
// does); a read error is logged and kept in the observation, never returned
// (docs/design.md, "Hook polling"). nil when there is no inventory.
func (h *HealthController) observeHooks(ctx context.Context, pi passInventory, cluster *v1alpha1.Cluster, clusterErr error) *hookObservation {
	if pi.inv == nil {
		return nil
	}
	log := h.logFrom(ctx)
	if pi.err != nil {
		log.Error(pi.err, "cannot poll hooks")
		return nil
	}
	o := &hookObservation{own: pi.own}
	o.hooks, o.stale = pi.own.RecordedHooks(pi.inv, inventory.FieldManagerHookStatus)
	var reader clustercache.ObjectReader
	for i := range o.hooks {
		hk := &o.hooks[i]
		gvr, ok := hookWorkloadGVR(hk.WorkloadKind)
		if !needsPoll(hk) || !ok || inventory.CheckReference(gvr, hk.Namespace, hk.WorkloadName) != nil {
			continue
		}
		if reader == nil && o.unreadable == nil {
			if clusterErr != nil {
				o.unreadable = clusterErr
			} else {
				reader, o.unreadable = h.Clusters.GetReader(ctx, cluster)
			}
		}
		if o.unreadable != nil {
			continue
		}
		obj, err := reader.Get(ctx, gvr, hk.Namespace, hk.WorkloadName)
		r := workloadRead{obj: obj, notFound: apierrors.IsNotFound(err), at: h.Clock.Now()}
		if err != nil && !r.notFound {
			r.obj, r.err = nil, err
			if ctx.Err() == nil {
				log.Error(err, "polling hook workload; state unchanged", "hook", hk.Name, "workload", objectName(hk.WorkloadKind, hk.Namespace, hk.WorkloadName))
			}
		}
		if o.reads == nil {
			o.reads = map[int]workloadRead{}
		}
		o.reads[i] = r
	}
	if o.unreadable != nil && ctx.Err() == nil {
		log.Error(o.unreadable, "cannot poll hooks")
	}
	return o
}

// needsPoll: a workloadName, and no finishedAt or a createdAt after finishedAt. Both
// times are stored to the second, so a createdAt in the same second as finishedAt counts
// as after: a hook re-armed within a second of finishing is polled again (a hook that
// merely finished in the second it was armed is polled once more, which moves its
// finishedAt to a later second and changes nothing else).
func needsPoll(hk *v1alpha1.HookEntry) bool {
	if hk.WorkloadName == "" {
		return false
	}
	if hk.FinishedAt == nil {
		return true
	}
	return hk.CreatedAt != nil && !hk.CreatedAt.Before(hk.FinishedAt)
}

// hookStatus is the hooks list that writeHookStatus applies: state, message and
// finishedAt of every recorded hook that has a state (not only the polled ones). It is
// nil when the observer already owns exactly these values, so once every hook has
// finished the loop stops writing to the inventory (docs/design.md, "Deletion"); stale (the
// observer still owns a hook the controller-manager dropped) forces a write that lets go.
func hookStatus(own *inventory.Ownership, before, after []v1alpha1.HookEntry, stale bool) []*acv1alpha1.HookEntryApplyConfiguration {
	changed := stale
	list := make([]*acv1alpha1.HookEntryApplyConfiguration, 0, len(after))
	for i := range after {
		hk := &after[i]
		if hk.State == "" {
			continue
		}
		// Only the observer's fields: a field left out is one the observer lets go of.
		e := acv1alpha1.HookEntry().WithName(hk.Name).WithState(hk.State)
		if hk.Message != "" {
			e.WithMessage(hk.Message)
		}
		if hk.FinishedAt != nil {
			e.WithFinishedAt(metav1.NewTime(hk.FinishedAt.UTC().Truncate(time.Second)))
		}
		list = append(list, e)
		b := &before[i]
		if !own.HookOwnedBy(inventory.FieldManagerHookStatus, hk.Name) || b.State != hk.State ||
			b.Message != hk.Message || !equalTime(b.FinishedAt, hk.FinishedAt) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return list
}

// writeHookStatus applies hooks.status to inv under the field manager
// convoy-hook-status, with inv's uid and resourceVersion rv as preconditions. It returns
// the resourceVersion after the write (rv when there was nothing to write), for the
// next write of the pass.
func (h *HealthController) writeHookStatus(ctx context.Context, inv *v1alpha1.ReleaseInventory, rv string, hooks hookOutcome, record string) (string, error) {
	if inv == nil || hooks.status == nil {
		return rv, nil
	}
	ac := inventoryApply(inv, rv, record).WithHooks(hooks.status...)
	if err := h.Writer.Apply(ctx, ac, client.FieldOwner(inventory.FieldManagerHookStatus), client.ForceOwnership); err != nil {
		return rv, fmt.Errorf("applying the status of %d hooks: %w", len(hooks.status), asRefused("hooks", len(hooks.status), ac, err))
	}
	return ptr.Deref(ac.ResourceVersion, rv), nil
}
