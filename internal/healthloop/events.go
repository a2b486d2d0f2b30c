package healthloop

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// Reasons of the Kubernetes Events (events.k8s.io/v1) that the health loop records. They
// are recorded on edges only, never once per steady pass (docs/operations.md, "Events").
const (
	EventHealthy            = "Healthy"            // Normal: Healthy from another condition (Progressing, Pending at a new render…), not as a first one
	EventProgressing        = "Progressing"        // Normal: was Healthy, now Progressing
	EventDegraded           = "Degraded"           // Warning: an entry turned Degraded
	EventUnknown            = "Unknown"            // Warning: an entry turned Unknown (not found, unreadable, evaluation error)
	EventRulesInvalid       = "RulesInvalid"       // Warning: a selected rule set does not compile
	EventAssessmentFailed   = "AssessmentFailed"   // Warning: the Release cannot be assessed (bad selector, unreadable inventory…)
	EventHookSucceeded      = "HookSucceeded"      // Normal
	EventHookFailed         = "HookFailed"         // Warning
	EventHookTimedOut       = "HookTimedOut"       // Warning
	EventClusterUnreachable = "ClusterUnreachable" // Warning, on the Release (rate-limited per Cluster) and once on the Cluster
	EventClusterReachable   = "ClusterReachable"   // Normal, on the Cluster, once the first Release of it is assessed again
)

// Actions of the Events.
const (
	actionAssess   = "Assess"
	actionPollHook = "PollHook"
	actionConnect  = "Connect"
)

// Bounds of the Events about one target cluster. When a cluster goes down, every
// Release of it turns Unknown within a pass or two; a thousand Releases must not make a
// thousand Events. The Cluster gets exactly one ClusterUnreachable Event per outage (and
// one ClusterReachable when it is back), from the replica that owns its shard; the
// Releases' own Events about the outage and about the recovery that follows draw from
// one token bucket per Cluster: clusterEventBurst at once, then one per
// 1/clusterEventQPS seconds. A Release past the bucket still says why in its Healthy condition.
const (
	clusterEventBurst = 10
	clusterEventQPS   = 0.1 // one per 10 s
)

// maxEventNote bounds an Event's note (the API server rejects more than 1 kB).
const maxEventNote = 1000

// recordHealthEvents records the Event of the edge of rel's Healthy condition from prev
// (as read at the start of the pass; nil for none) to hs, after hs was written; a is the
// assessment (nil when it failed, with hs.cause saying why).
func (h *HealthController) recordHealthEvents(ctx context.Context, rel *v1alpha1.Release, prev *metav1.Condition, hs healthStatus, a *assessment) {
	if h.Events == nil {
		return
	}
	cause := hs.cause
	clusterKey := toolscache.ObjectName{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}.String()
	unreachable := cause != nil && errors.Is(cause, clustercache.ErrClusterNotConnected)
	if unreachable && h.markClusterDown(clusterKey, true) {
		h.clusterEvent(ctx, rel, corev1.EventTypeWarning, EventClusterUnreachable,
			"cluster unreachable: %s (Releases of this cluster are Unknown until it answers)", clustercache.DescribeError(cause))
	}
	if !unreachable && a != nil && h.markClusterDown(clusterKey, false) {
		h.clusterEvent(ctx, rel, corev1.EventTypeNormal, EventClusterReachable, "cluster reachable again")
	}

	prevKind := ""
	if prev != nil {
		prevKind = priorKind(prev)
	}
	kind := conditionKind(hs)
	if kind == prevKind {
		return
	}
	lastKind := h.swapKind(keyOf(rel), kind)
	if kind == lastKind {
		return
	}
	eventType, reason := corev1.EventTypeWarning, ""
	note := hs.message
	switch {
	case kind == v1alpha1.ReasonHealthy && prev == nil && lastKind == "":
		// The Release's first condition, and it is Healthy: no edge to tell (the
		// condition's lastTransitionTime says since when). An observer installed over a
		// fleet of healthy Releases records no Event per Release (docs/design.md,
		// "Kubernetes Events").
		return
	case kind == v1alpha1.ReasonHealthy:
		// From any other kind (Progressing, Degraded, Pending, NotConfigured…), also
		// one that this process wrote and its cache does not show yet.
		eventType, reason = corev1.EventTypeNormal, EventHealthy
	case kind == v1alpha1.ReasonProgressing && prevKind == v1alpha1.ReasonHealthy:
		eventType, reason = corev1.EventTypeNormal, EventProgressing
		if d := firstDiagnosis(a, v1alpha1.StateProgressing); d != "" {
			note += " — " + d
		}
	case kind == v1alpha1.ReasonDegraded:
		reason, note = EventDegraded, offenders(a, v1alpha1.StateDegraded, hs.message)
	case kind == v1alpha1.ReasonUnknown:
		reason, note = EventUnknown, offenders(a, v1alpha1.StateUnknown, hs.message)
	case kind == EventClusterUnreachable:
		reason = EventClusterUnreachable
	case strings.HasPrefix(kind, EventRulesInvalid+":"):
		reason = EventRulesInvalid
	case kind == EventAssessmentFailed:
		reason = EventAssessmentFailed
	default:
		return // Pending, NotConfigured, Progressing from anything but Healthy
	}
	if (unreachable || prevKind == EventClusterUnreachable) && !h.clusterEvents(clusterKey).TryAccept() {
		h.logFrom(ctx).V(1).Info("event suppressed: the Cluster's event budget is spent", "reason", reason, "cluster", clusterKey)
		return
	}
	h.Events.Eventf(rel, nil, eventType, reason, actionAssess, "%s", truncateNote(note))
}

// recordHookEvents records one Event per hook that reached a terminal state in this
// pass, after the hooks' status was written.
func (h *HealthController) recordHookEvents(rel *v1alpha1.Release, hooks hookOutcome) {
	if h.Events == nil {
		return
	}
	for _, fin := range hooks.terminal {
		hk := fin.HookEntry
		workload := objectName(hk.WorkloadKind, hk.Namespace, hk.WorkloadName)
		note := fmt.Sprintf("hook %s (%s) %s", hk.Name, workload, strings.ToLower(string(hk.State)))
		if hk.Message != "" {
			note += ": " + hk.Message
		}
		switch {
		case hk.State == v1alpha1.HookSucceeded:
			h.Events.Eventf(rel, nil, corev1.EventTypeNormal, EventHookSucceeded, actionPollHook, "%s", truncateNote(note))
		case fin.timedOut:
			h.Events.Eventf(rel, nil, corev1.EventTypeWarning, EventHookTimedOut, actionPollHook, "%s", truncateNote(note))
		default:
			h.Events.Eventf(rel, nil, corev1.EventTypeWarning, EventHookFailed, actionPollHook, "%s", truncateNote(note))
		}
	}
}

// clusterEvent records an Event on rel's Cluster, read from the cache (a Cluster that
// is gone gets none: the Releases say it is missing).
func (h *HealthController) clusterEvent(ctx context.Context, rel *v1alpha1.Release, eventType, reason, format string, args ...any) {
	c := &v1alpha1.Cluster{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}, c); err != nil {
		return
	}
	h.Events.Eventf(c, nil, eventType, reason, actionConnect, "%s", truncateNote(fmt.Sprintf(format, args...)))
}

// firstDiagnosis is the diagnosis of the first entry in state that has one ("" for none).
func firstDiagnosis(a *assessment, state v1alpha1.HealthState) string {
	if a == nil {
		return ""
	}
	for i := range a.entries {
		if a.entries[i].state == state && a.entries[i].diagnosis != "" {
			return a.entries[i].diagnosis
		}
	}
	return ""
}

// offenders names up to three entries in state with their messages (and diagnoses,
// after " — "), after the count of the condition message ("2/5 healthy; …"); without an
// assessment, the message itself.
func offenders(a *assessment, state v1alpha1.HealthState, message string) string {
	if a == nil {
		return message
	}
	count, _, _ := strings.Cut(message, ";")
	var names []string
	n := 0
	for i := range a.entries {
		r := &a.entries[i]
		if r.state != state {
			continue
		}
		n++
		if len(names) == 3 {
			continue
		}
		s := objectName(r.key.Kind, r.key.Namespace, r.key.Name)
		if r.message != "" {
			s += ": " + r.message
		}
		if r.diagnosis != "" {
			s += " — " + r.diagnosis
		}
		names = append(names, s)
	}
	if len(names) == 0 {
		return message
	}
	out := fmt.Sprintf("%s; %d %s: %s", count, n, state, strings.Join(names, "; "))
	if n > len(names) {
		out += fmt.Sprintf("; and %d more", n-len(names))
	}
	return out
}

// truncateNote keeps a note on one line and under the API server's limit (oneLine).
func truncateNote(s string) string { return oneLine(s, maxEventNote) }

// priorCondition returns a copy of rel's Healthy condition before this pass writes.
func priorCondition(rel *v1alpha1.Release) *metav1.Condition {
	c := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ConditionHealthy)
	if c == nil {
		return nil
	}
	cp := *c
	return &cp
}

// EventRecorder is what the loop needs of an events.k8s.io/v1 recorder (the manager's
// GetEventRecorder).
type EventRecorder = events.EventRecorder
