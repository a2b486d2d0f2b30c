package healthloop

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// The decision of the hooks' states from the reads of their workloads (docs/design.md,
// "Hook outcomes"): pure functions of what observeHooks read and the time of the pass.

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
