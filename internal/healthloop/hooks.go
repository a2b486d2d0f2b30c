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

// hookOutcome is what pollHooks tells the rest of the pass.
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

// pollHooks polls the workloads of the hooks in the pass's inventory (read from the
// cache) and decides their state (docs/design.md, "Hook polling"); writeHookStatus writes it. It
// polls a hook that has a workloadName and either no finishedAt or a createdAt after
// its finishedAt (the controller-manager re-armed it). Polling errors are logged and
// change nothing (docs/design.md, "One pass" step 4).
func (h *HealthController) pollHooks(ctx context.Context, rel *v1alpha1.Release, pi passInventory, cluster *v1alpha1.Cluster, clusterErr error) hookOutcome {
	var out hookOutcome
	if pi.inv == nil {
		return out
	}
	log := h.logFrom(ctx)
	if pi.err != nil {
		log.Error(pi.err, "cannot poll hooks")
		return out
	}
	inv := pi.inv
	hooks, stale := pi.own.RecordedHooks(inv, inventory.FieldManagerHookStatus)
	now := h.Clock.Now()
	next := make([]v1alpha1.HookEntry, len(hooks))
	copy(next, hooks)
	var reader clustercache.ObjectReader
	var pollErr error
	for i := range next {
		hk := &next[i]
		if !needsPoll(hk) {
			if hk.State == v1alpha1.HookRunning {
				out.running = append(out.running, hk.Name)
			}
			continue
		}
		if reader == nil && pollErr == nil {
			if clusterErr != nil {
				pollErr = clusterErr
			} else {
				reader, pollErr = h.Clusters.GetReader(ctx, cluster)
			}
		}
		if pollErr != nil {
			if hk.State == v1alpha1.HookRunning || hk.State == "" {
				out.running = append(out.running, hk.Name)
			}
			continue
		}
		was := *hk
		poll, err := pollHookWorkload(ctx, reader, hk, now)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "polling hook workload; state unchanged", "hook", hk.Name, "workload", objectName(hk.WorkloadKind, hk.Namespace, hk.WorkloadName))
			}
			if hk.State == v1alpha1.HookRunning || hk.State == "" {
				out.running = append(out.running, hk.Name)
			}
			continue
		}
		if poll.kept {
			continue // a finished hook's workload was deleted: its outcome stands
		}
		hk.State, hk.Message = poll.state, health.TruncateMessage(poll.message)
		if poll.state.IsTerminal() {
			// The time of the observation, not of the pass's start: a workload that
			// finished during the read must not get a finishedAt before it finished
			// (and in its arming second, which would make it look re-armed).
			t := metav1.NewTime(h.Clock.Now().UTC().Truncate(time.Second))
			hk.FinishedAt = &t
			// A polled hook that is terminal is an edge: it had not finished, or it was
			// re-armed. In the ambiguous same-second case this may send one sync
			// request too many, never one too few (a missed one would stall the
			// controller-manager until its resync).
			out.finished++
			if was.FinishedAt == nil || was.State != hk.State || rearmedAfterFinish(&was) {
				out.terminal = append(out.terminal, finishedHook{HookEntry: *hk, timedOut: poll.timedOut})
			}
			log.Info("hook finished", "hook", hk.Name, "state", poll.state, "message", poll.message, "rearmed", was.FinishedAt != nil)
		} else {
			hk.FinishedAt = nil
			out.running = append(out.running, hk.Name)
		}
	}
	out.status = hookStatus(pi.own, hooks, next, stale)
	if pollErr != nil && ctx.Err() == nil {
		log.Error(pollErr, "cannot poll hooks")
	}
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

// pollHookWorkload reads the hook's Job or Pod from the target and decides its state
// (docs/design.md, "Hook outcomes"): Job Complete=True ⇒ Succeeded, Failed=True ⇒ Failed;
// Pod phase Succeeded or Failed; otherwise Failed when now − createdAt ≥ timeout,
// Failed "workload not found" when it is gone, else Running. A terminal state never
// regresses: when the workload of a hook that already finished is gone (and createdAt
// is not in a later second than finishedAt, so the hook was not re-armed), the poll
// keeps the recorded outcome. A read error other than NotFound is returned and changes
// nothing.
func pollHookWorkload(ctx context.Context, reader clustercache.ObjectReader, hk *v1alpha1.HookEntry, now time.Time) (hookPoll, error) {
	gvr, ok := hookWorkloadGVR(hk.WorkloadKind)
	if !ok {
		return hookPoll{state: v1alpha1.HookFailed, message: fmt.Sprintf("unsupported workloadKind %q (want Job or Pod)", hk.WorkloadKind)}, nil
	}
	if err := inventory.CheckReference(gvr, hk.Namespace, hk.WorkloadName); err != nil {
		return hookPoll{state: v1alpha1.HookFailed, message: health.TruncateMessage(err.Error())}, nil
	}
	obj, err := reader.Get(ctx, gvr, hk.Namespace, hk.WorkloadName)
	notFound := apierrors.IsNotFound(err)
	if err != nil && !notFound {
		return hookPoll{}, err
	}
	if notFound && hk.State.IsTerminal() && !rearmedAfterFinish(hk) {
		return hookPoll{state: hk.State, message: hk.Message, kept: true}, nil
	}
	if !notFound {
		var state v1alpha1.HookState
		var msg string
		if hk.WorkloadKind == "Job" {
			state, msg = jobOutcome(obj)
		} else {
			state, msg = podOutcome(obj)
		}
		if state.IsTerminal() {
			return hookPoll{state: state, message: msg}, nil
		}
	}
	if hk.CreatedAt != nil && now.Sub(hk.CreatedAt.Time) >= hk.GetTimeout() {
		return hookPoll{state: v1alpha1.HookFailed, message: "timed out after " + shortDuration(hk.GetTimeout()), timedOut: true}, nil
	}
	if notFound {
		return hookPoll{state: v1alpha1.HookFailed, message: "workload not found"}, nil
	}
	return hookPoll{state: v1alpha1.HookRunning}, nil
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
