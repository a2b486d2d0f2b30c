package healthloop

import (
	"time"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/controllerkit"
)

// Pending targets of the re-check backoff (docs/design.md, "Re-check backoff").
const (
	targetRenderPending = "render-pending"
	// targetAssessment is pending while the assessment fails (a compile error, a missing or
	// unreachable cluster), so the loop recovers by itself once the cause goes away.
	targetAssessment = "assessment"
	// targetUnowned is pending while the inventory's entries are owned by no field
	// manager: an apply that only adds the managedFields changes no field that wakes the
	// loop (InventoryChanged).
	targetUnowned = "unowned-entries"
)

func targetObject(key string) string { return "object:" + key }
func targetHook(name string) string  { return "hook:" + name }

// Re-check backoff: 2s, 4s, 8s, 16s, then 32s for every later attempt,
// capped at syncPolicy.interval when set, then stretched by a jitter factor in [1.0, 1.2).
const (
	recheckBase      = 2 * time.Second
	recheckMax       = 32 * time.Second
	recheckJitter    = 0.2
	recheckDoublings = 4 // 2s << 4 = 32s
)

// progressBackoff converts an attempt count (1 for the first pass that finds a target
// pending) into a delay: 2s << (count-1), at most 32s, at most interval when interval
// > 0. It saturates: no count overflows.
func progressBackoff(count int, interval time.Duration) time.Duration {
	if count < 1 {
		count = 1
	}
	d := recheckMax
	if count-1 < recheckDoublings {
		d = recheckBase << (count - 1)
	}
	if interval > 0 && d > interval {
		d = interval
	}
	return d
}

// pendingTargets lists the targets that keep the Release's re-check going: each entry
// that is not Healthy, and render-pending while the condition (hs, as written this pass)
// is Pending.
func (a *assessment) pendingTargets(hs healthStatus) []string {
	var out []string
	for i := range a.entries {
		if a.entries[i].state != v1alpha1.StateHealthy {
			out = append(out, targetObject(a.entries[i].key.String()))
		}
	}
	if hs.reason == v1alpha1.ReasonPending {
		out = append(out, targetRenderPending)
	}
	if len(a.entries) == 0 && a.unowned > 0 {
		out = append(out, targetUnowned)
	}
	return out
}

// scheduleHealthRecheck chooses the delay of key's next pass (docs/design.md, "Re-check backoff").
// Each pending target's attempt count goes up by one and the counts of targets that are
// no longer pending are cleared; the shortest delay wins, so a new pending target brings
// the delay back to 2s. With no pending target the counts clear and the key comes back
// after syncPolicy.interval, or only on events when there is none.
func (h *HealthController) scheduleHealthRecheck(key string, rel *v1alpha1.Release, pending []string) controllerkit.Result {
	interval, _ := rel.GetInterval()
	var delay time.Duration
	h.remember(key, func(m *releaseMemory) {
		prev := m.attempts
		m.attempts = nil
		for _, t := range pending {
			if _, seen := m.attempts[t]; seen {
				continue
			}
			if m.attempts == nil {
				m.attempts = make(map[string]int, len(pending))
			}
			m.attempts[t] = prev[t] + 1
			if d := progressBackoff(m.attempts[t], interval); delay == 0 || d < delay {
				delay = d
			}
		}
	})
	if len(pending) == 0 {
		return controllerkit.Result{RequeueAfter: interval}
	}
	return controllerkit.Result{RequeueAfter: h.jitter(delay)}
}

// jitter stretches d by a random factor in [1.0, 1.2).
func (h *HealthController) jitter(d time.Duration) time.Duration {
	r := 0.0
	if h.Rand != nil {
		r = h.Rand()
	}
	if r < 0 || r >= 1 {
		r = 0
	}
	return d + time.Duration(float64(d)*recheckJitter*r)
}
