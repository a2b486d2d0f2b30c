package health

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/controller/base"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// hookOutcome is what pollHooks tells the rest of the pass.
type hookOutcome struct {
	// finished counts the hooks that reached a terminal state in this pass.
	finished int
	// running names the hooks whose state is Running after this pass.
	running []string
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

// pollHooks polls the workloads of the hooks in the pass's inventory (read from the
// cache) and writes their state (spec "Hook polling"). It polls a hook that has a
// workloadName and either no finishedAt or a createdAt after its finishedAt (the
// controller-manager re-armed it). Its error is for the log only: the pass goes on
// (spec "One pass" step 4).
func (h *HealthController) pollHooks(ctx context.Context, rel *v1alpha1.Release, pi passInventory, cluster *v1alpha1.Cluster, clusterErr error) (hookOutcome, error) {
	var out hookOutcome
	if pi.err != nil {
		return out, pi.err
	}
	if pi.inv == nil {
		return out, nil
	}
	inv := pi.inv
	hooks, stale := pi.own.RecordedHooks(inv, inventory.FieldManagerHookStatus)
	now := h.Clock.Now()
	next := make([]v1alpha1.HookEntry, len(hooks))
	copy(next, hooks)
	var reader base.ObjectReader
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
				reader, pollErr = h.Clusters.ForCluster(ctx, cluster)
			}
		}
		if pollErr != nil {
			if hk.State == v1alpha1.HookRunning || hk.State == "" {
				out.running = append(out.running, hk.Name)
			}
			continue
		}
		was := *hk
		state, message, err := pollHookWorkload(ctx, reader, hk, now)
		if err != nil {
			h.logFrom(ctx).Error(err, "polling hook workload; state unchanged", "hook", hk.Name, "workload", hk.WorkloadKind+" "+hk.Namespace+"/"+hk.WorkloadName)
			if hk.State == v1alpha1.HookRunning || hk.State == "" {
				out.running = append(out.running, hk.Name)
			}
			continue
		}
		hk.State, hk.Message = state, health.TruncateMessage(message)
		if state.IsTerminal() {
			t := metav1.NewTime(now.UTC().Truncate(time.Second))
			hk.FinishedAt = &t
			// A polled hook that is terminal is an edge: it had not finished, or it was
			// re-armed. In the ambiguous same-second case this may send one sync
			// request too many, never one too few (a missed one would stall the
			// controller-manager until its resync).
			out.finished++
			h.logFrom(ctx).Info("hook finished", "hook", hk.Name, "state", state, "message", message, "rearmed", was.FinishedAt != nil)
		} else {
			hk.FinishedAt = nil
			out.running = append(out.running, hk.Name)
		}
	}
	if err := h.writeHookStatus(ctx, inv, pi.own, hooks, next, stale); err != nil {
		return hookOutcome{running: out.running}, err
	}
	if pollErr != nil {
		return out, fmt.Errorf("cannot poll hooks: %w", pollErr)
	}
	return out, nil
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

// pollHookWorkload reads the hook's Job or Pod from the target and decides its state
// (CONTRACT §2, "Hook outcomes"): Job Complete=True ⇒ Succeeded, Failed=True ⇒ Failed;
// Pod phase Succeeded or Failed; otherwise Failed when now − createdAt ≥ timeout,
// Failed "workload not found" when it is gone, else Running. A read error other than
// NotFound is returned and changes nothing.
func pollHookWorkload(ctx context.Context, reader base.ObjectReader, hk *v1alpha1.HookEntry, now time.Time) (v1alpha1.HookState, string, error) {
	var gvr schema.GroupVersionResource
	switch hk.WorkloadKind {
	case "Job":
		gvr = gvrJobs
	case "Pod":
		gvr = gvrPods
	default:
		return v1alpha1.HookFailed, fmt.Sprintf("unsupported workloadKind %q (want Job or Pod)", hk.WorkloadKind), nil
	}
	obj, err := reader.Get(ctx, gvr, hk.Namespace, hk.WorkloadName)
	notFound := apierrors.IsNotFound(err)
	if err != nil && !notFound {
		return "", "", err
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
			return state, msg, nil
		}
	}
	if hk.CreatedAt != nil && now.Sub(hk.CreatedAt.Time) >= hk.GetTimeout() {
		return v1alpha1.HookFailed, "timed out after " + shortDuration(hk.GetTimeout()), nil
	}
	if notFound {
		return v1alpha1.HookFailed, "workload not found", nil
	}
	return v1alpha1.HookRunning, "", nil
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

// writeHookStatus applies state, message and finishedAt of every recorded hook that has
// a state (not only the polled ones) under the field manager convoy-hook-status. It
// writes nothing when nothing changed, so once every hook has finished the loop stops
// writing to the inventory (spec "Deletion").
func (h *HealthController) writeHookStatus(ctx context.Context, inv *v1alpha1.ReleaseInventory, own *inventory.Ownership, before, after []v1alpha1.HookEntry, stale bool) error {
	changed := stale
	list := make([]any, 0, len(after))
	for i := range after {
		hk := &after[i]
		if hk.State == "" {
			continue
		}
		e := map[string]any{"name": hk.Name, "state": string(hk.State)}
		if hk.Message != "" {
			e["message"] = hk.Message
		}
		if hk.FinishedAt != nil {
			e["finishedAt"] = hk.FinishedAt.UTC().Format(time.RFC3339)
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
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "ReleaseInventory",
		"metadata":   inventoryMeta(inv),
		"hooks":      list,
	}}
	if err := h.Writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(inventory.FieldManagerHookStatus), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the status of %d hooks: %w", len(list), err)
	}
	// The entries write of this pass follows: it must expect our own write.
	if rv := u.GetResourceVersion(); rv != "" {
		inv.ResourceVersion = rv
	}
	return nil
}
