// The conditions the demo's steps wait for, read from a snapshot of the Release.

package main

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// waveHealthy holds when every object of wave w is Healthy as assessed at r.Ref; with
// final, also when every entry is Healthy, every hook Succeeded and the Healthy
// condition is True with reason Healthy.
func (s *scenario) waveHealthy(r *render, w int32, final bool) condFunc {
	return func(snap *snapshot) ([]string, error) {
		var missing []string
		for _, o := range r.wave(w) {
			if m := entryMissing(snap, o, r.Ref, v1alpha1.StateHealthy); m != "" {
				missing = append(missing, m)
			}
		}
		if !final {
			return missing, nil
		}
		for _, h := range snap.Health.Hooks {
			if h.State != v1alpha1.HookSucceeded {
				missing = append(missing, fmt.Sprintf("hook %s Succeeded (it is %s)", h.Name, stateOr(string(h.State), "not polled")))
			}
		}
		if m := conditionMissing(snap, metav1.ConditionTrue, v1alpha1.ReasonHealthy); m != "" {
			missing = append(missing, m)
		}
		return missing, nil
	}
}

// hookSucceeded holds when the hook name Succeeded; a Failed hook ends the scenario.
func (s *scenario) hookSucceeded(name string) condFunc {
	return func(snap *snapshot) ([]string, error) {
		h := snap.hook(name)
		switch {
		case h == nil:
			return []string{"hook " + name + " in the /health answer"}, nil
		case h.State == v1alpha1.HookFailed:
			return nil, fmt.Errorf("hook %s Failed: %s", name, h.Message)
		case h.State != v1alpha1.HookSucceeded:
			return []string{fmt.Sprintf("hook %s Succeeded (it is %s)", name, stateOr(string(h.State), "not polled yet"))}, nil
		}
		return nil, nil
	}
}

// deploymentDegraded holds when the Deployment of r is Degraded at r.Ref and the Healthy
// condition is False with reason Degraded. It notes whether the Deployment was seen
// Progressing at r.Ref first.
func (s *scenario) deploymentDegraded(r *render) condFunc {
	var web object
	for _, o := range r.Objects {
		if o.Kind == "Deployment" {
			web = o
		}
	}
	return func(snap *snapshot) ([]string, error) {
		e := snap.entry(web.Kind, web.Namespace, web.Name)
		if e != nil && e.AssessedRenderRef == r.Ref {
			switch e.State {
			case v1alpha1.StateProgressing:
				s.progressingSeen = true
			case v1alpha1.StateHealthy:
				return nil, fmt.Errorf("Deployment %s is Healthy at %s, whose Pods no node can take", objectName(web.Namespace, web.Name), r.Ref)
			}
		}
		var missing []string
		if m := entryMissing(snap, web, r.Ref, v1alpha1.StateDegraded); m != "" {
			missing = append(missing, m)
		}
		if m := conditionMissing(snap, metav1.ConditionFalse, v1alpha1.ReasonDegraded); m != "" {
			missing = append(missing, m)
		}
		return missing, nil
	}
}

// entryMissing says how the entry of o falls short of state at render ref, or "".
func entryMissing(snap *snapshot, o object, ref string, state v1alpha1.HealthState) string {
	name := o.Kind + " " + objectName(o.Namespace, o.Name)
	e := snap.entry(o.Kind, o.Namespace, o.Name)
	switch {
	case e == nil:
		return name + " recorded in the inventory"
	case e.RenderRef != ref || e.AssessedRenderRef != ref:
		return fmt.Sprintf("%s %s at %s (recorded at %s, assessed at %s)", name, state, ref, stateOr(e.RenderRef, "-"), stateOr(e.AssessedRenderRef, "-"))
	case e.State != state:
		msg := ""
		if e.Message != "" {
			msg = ": " + e.Message
		}
		return fmt.Sprintf("%s %s (it is %s%s)", name, state, stateOr(string(e.State), "not assessed"), msg)
	}
	return ""
}

// conditionMissing says how the Healthy condition falls short of status and reason, or
// "".
func conditionMissing(snap *snapshot, status metav1.ConditionStatus, reason string) string {
	c := snap.condition()
	switch {
	case c == nil:
		return fmt.Sprintf("condition Healthy=%s (%s) (no condition yet)", status, reason)
	case c.Status != status || c.Reason != reason:
		return fmt.Sprintf("condition Healthy=%s (%s) (it is %s (%s): %s)", status, reason, c.Status, c.Reason, c.Message)
	case c.ObservedGeneration != 0 && c.ObservedGeneration != snap.Release.Generation:
		return fmt.Sprintf("condition Healthy=%s (%s) for generation %d (it is for %d)", status, reason, snap.Release.Generation, c.ObservedGeneration)
	}
	return ""
}

// stateOr returns s, or def when s is empty.
func stateOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
