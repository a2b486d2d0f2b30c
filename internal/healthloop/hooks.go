package healthloop

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
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

// decideHooks decides the state of every hook of o at now (docs/design.md, "Hook
// outcomes"), a pure function: the hooks' new status for writeHookStatus, those still
// running, and those that finished in this pass. A hook whose workload could not be read
// keeps its state (and is pending while it is Running or has none).
func decideHooks(o *hookObservation, now time.Time) hookOutcome {
	var out hookOutcome
	if o == nil {
		return out
	}
	next := make([]v1alpha1.HookEntry, len(o.hooks))
	copy(next, o.hooks)
	for i := range next {
		hk := &next[i]
		if !needsPoll(hk) {
			if hk.State == v1alpha1.HookRunning {
				out.running = append(out.running, hk.Name)
			}
			continue
		}
		read, wasRead := o.reads[i]
		poll, decided := hookPollOf(hk, read, wasRead, now)
		if !decided {
			if hk.State == v1alpha1.HookRunning || hk.State == "" {
				out.running = append(out.running, hk.Name)
			}
			continue
		}
		if poll.kept {
			continue // a finished hook's workload was deleted: its outcome stands
		}
		was := *hk
		hk.State, hk.Message = poll.state, health.TruncateMessage(poll.message)
		if poll.state.IsTerminal() {
			at := read.at
			if !wasRead {
				at = now
			}
			t := metav1.NewTime(at.UTC().Truncate(time.Second))
			hk.FinishedAt = &t
			// A polled hook that is terminal is an edge: it had not finished, or it was
			// re-armed. In the ambiguous same-second case this may send one sync
			// request too many, never one too few (a missed one would stall the
			// controller-manager until its resync).
			out.finished++
			if was.FinishedAt == nil || was.State != hk.State || rearmedAfterFinish(&was) {
				out.terminal = append(out.terminal, finishedHook{HookEntry: *hk, timedOut: poll.timedOut, rearmed: was.FinishedAt != nil})
			}
		} else {
			hk.FinishedAt = nil
			out.running = append(out.running, hk.Name)
		}
	}
	out.status = hookStatus(o.own, o.hooks, next, o.stale)
	return out
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

// hookPoll is what one poll of a hook's workload decided.
type hookPoll struct {
	state   v1alpha1.HookState
	message string
	// kept: the hook had finished, was not re-armed since, and its workload is gone
	// (deleted on success, say): the recorded outcome stands and nothing is written.
	kept bool
	// timedOut: Failed because now − createdAt reached the hook's timeout.
	timedOut bool
}

// hookPollOf decides the state of the polled hook hk from the read of its workload
// (docs/design.md, "Hook outcomes"): Job Complete=True ⇒ Succeeded, Failed=True ⇒
// Failed; Pod phase Succeeded or Failed; otherwise Failed when now − createdAt ≥ timeout,
// Failed "workload not found" when it is gone, else Running. A workloadKind other than
// Job or Pod, and a reference that would change the URL of the read, are Failed without
// a read. A terminal state never regresses: when the workload of a hook that already
// finished is gone (and createdAt is not in a later second than finishedAt, so the hook
// was not re-armed), the poll keeps the recorded outcome. decided is false when the
// workload was not read (the cluster is not connected) or its read failed: the hook
// keeps its state.
func hookPollOf(hk *v1alpha1.HookEntry, read workloadRead, wasRead bool, now time.Time) (_ hookPoll, decided bool) {
	gvr, ok := hookWorkloadGVR(hk.WorkloadKind)
	if !ok {
		return hookPoll{state: v1alpha1.HookFailed, message: fmt.Sprintf("unsupported workloadKind %q (want Job or Pod)", hk.WorkloadKind)}, true
	}
	if err := inventory.CheckReference(gvr, hk.Namespace, hk.WorkloadName); err != nil {
		return hookPoll{state: v1alpha1.HookFailed, message: health.TruncateMessage(err.Error())}, true
	}
	if !wasRead || read.err != nil {
		return hookPoll{}, false
	}
	if read.notFound && hk.State.IsTerminal() && !rearmedAfterFinish(hk) {
		return hookPoll{state: hk.State, message: hk.Message, kept: true}, true
	}
	if !read.notFound {
		var state v1alpha1.HookState
		var msg string
		if hk.WorkloadKind == "Job" {
			state, msg = jobOutcome(read.obj)
		} else {
			state, msg = podOutcome(read.obj)
		}
		if state.IsTerminal() {
			return hookPoll{state: state, message: msg}, true
		}
	}
	if hk.CreatedAt != nil && now.Sub(hk.CreatedAt.Time) >= hk.GetTimeout() {
		return hookPoll{state: v1alpha1.HookFailed, message: "timed out after " + shortDuration(hk.GetTimeout()), timedOut: true}, true
	}
	if read.notFound {
		return hookPoll{state: v1alpha1.HookFailed, message: "workload not found"}, true
	}
	return hookPoll{state: v1alpha1.HookRunning}, true
}

// rearmedAfterFinish reports whether hk was certainly re-armed after it finished: its
// createdAt is in a later second than its finishedAt (both are stored to the second).
func rearmedAfterFinish(hk *v1alpha1.HookEntry) bool {
	return hk.FinishedAt != nil && hk.CreatedAt != nil && hk.CreatedAt.Unix() > hk.FinishedAt.Unix()
}

func jobOutcome(job *unstructured.Unstructured) (v1alpha1.HookState, string) {
	conds, _, _ := unstructured.NestedSlice(job.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["status"] != "True" {
			continue
		}
		reason, _ := m["reason"].(string)
		message, _ := m["message"].(string)
		switch m["type"] {
		case "Complete":
			return v1alpha1.HookSucceeded, joinNonEmpty(reason, message)
		case "Failed":
			return v1alpha1.HookFailed, joinNonEmpty(reason, message)
		}
	}
	return v1alpha1.HookRunning, ""
}

func podOutcome(pod *unstructured.Unstructured) (v1alpha1.HookState, string) {
	phase, _, _ := unstructured.NestedString(pod.Object, "status", "phase")
	switch phase {
	case "Succeeded":
		return v1alpha1.HookSucceeded, ""
	case "Failed":
		statuses, _, _ := unstructured.NestedSlice(pod.Object, "status", "containerStatuses")
		for _, s := range statuses {
			cs, ok := s.(map[string]any)
			if !ok {
				continue
			}
			term, found, _ := unstructured.NestedMap(cs, "state", "terminated")
			if !found {
				continue
			}
			name, _ := cs["name"].(string)
			reason, _ := term["reason"].(string)
			code, _, _ := unstructured.NestedInt64(term, "exitCode")
			return v1alpha1.HookFailed, fmt.Sprintf("container %s terminated: %s (exit code %d)", name, orDash(reason), code)
		}
		reason, _, _ := unstructured.NestedString(pod.Object, "status", "reason")
		message, _, _ := unstructured.NestedString(pod.Object, "status", "message")
		if r := joinNonEmpty(reason, message); r != "" {
			return v1alpha1.HookFailed, r
		}
		return v1alpha1.HookFailed, "pod failed"
	}
	return v1alpha1.HookRunning, ""
}

func joinNonEmpty(reason, message string) string {
	switch {
	case reason != "" && message != "":
		return reason + ": " + message
	case reason != "":
		return reason
	}
	return message
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortDuration formats d as "10m" rather than "10m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
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
