package faults

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

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
