package server

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/inventory"
	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// BuildHealthResult builds the /health response of rel from inv without assessing anything
// (docs/design.md, "The write protocol"). inv may be nil (no inventory yet): the result then
// has no entries, no hooks and a zero summary. Only the entries and hooks that the
// controller-manager still records count (inventory.RecordedEntries), so an entry that
// the controller-manager dropped vanishes even while the observer's fields keep it in
// the object. An entry's decidedBy and rulesApplied are the ones the observer recorded
// with its state; for a Release without spec.healthAssessment nothing is selected, so
// every entry has rulesApplied 0 and no decidedBy. DecidedByError counts the assessed
// entries that lack the recorded fields (an observer that did not record them assessed
// them). The error is about unreadable managedFields of inv.
func BuildHealthResult(rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) (syncapi.HealthResult, error) {
	if rel == nil {
		return syncapi.HealthResult{}, errors.New("no release")
	}
	resp := syncapi.HealthResult{
		Release: toolscache.MetaObjectToName(rel).String(),
		Entries: []syncapi.HealthEntry{},
		Hooks:   []syncapi.HealthHook{},
	}
	var entries []v1alpha1.InventoryEntry
	var hooks []v1alpha1.HookEntry
	if inv != nil {
		var err error
		if entries, _, err = inventory.RecordedEntries(inv, ""); err != nil {
			return syncapi.HealthResult{}, fmt.Errorf("reading the entries of ReleaseInventory %s/%s: %w", inv.Namespace, inv.Name, err)
		}
		if hooks, _, err = inventory.RecordedHooks(inv, ""); err != nil {
			return syncapi.HealthResult{}, fmt.Errorf("reading the hooks of ReleaseInventory %s/%s: %w", inv.Namespace, inv.Name, err)
		}
	}
	resp.RenderCurrent = inventory.RenderCurrent(rel.GetLastAttemptedRenderRef(), entries)
	resp.Summary = inventory.Summarize(entries)
	configured := rel.Spec.HealthAssessment != nil
	unrecorded := 0
	for i := range entries {
		e := healthEntry(&entries[i], configured)
		if configured && e.State != "" && e.RulesApplied == nil {
			unrecorded++
		}
		resp.Entries = append(resp.Entries, e)
	}
	if unrecorded > 0 {
		resp.DecidedByError = fmt.Sprintf("the observer has not recorded decidedBy and rulesApplied for %d of the %d entries yet: "+
			"they were assessed by an observer that does not record them, and the next pass writes them", unrecorded, len(entries))
	}
	for i := range hooks {
		resp.Hooks = append(resp.Hooks, healthHook(&hooks[i]))
	}
	slices.SortFunc(resp.Entries, func(a, b syncapi.HealthEntry) int { return health.CompareEntries(entryPosition(&a), entryPosition(&b)) })
	slices.SortFunc(resp.Hooks, func(a, b syncapi.HealthHook) int { return cmp.Compare(a.Name, b.Name) })
	return resp, nil
}

// position is where the entry stands in the order of /health (health.CompareEntries).
func entryPosition(e *syncapi.HealthEntry) health.EntryPosition {
	return health.EntryPosition{Wave: e.Wave, Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}
}

// healthEntry is the /health entry of e; configured says whether the Release has a
// spec.healthAssessment (without one, no rule judges anything).
func healthEntry(e *v1alpha1.InventoryEntry, configured bool) syncapi.HealthEntry {
	out := syncapi.HealthEntry{
		Group:             e.Group,
		Version:           e.Version,
		Kind:              e.Kind,
		Namespace:         e.Namespace,
		Name:              e.Name,
		Wave:              e.GetWave(),
		State:             e.State,
		Message:           e.Message,
		RenderRef:         e.RenderRef,
		AssessedRenderRef: e.AssessedRenderRef,
		Diagnosis:         e.Diagnosis,
		FirstUnhealthy:    timeOrNil(e.FirstUnhealthy),
	}
	switch {
	case !configured:
		out.RulesApplied = ptr.To(0)
	case e.State != "":
		if e.State != v1alpha1.StateHealthy {
			out.DecidedBy = inventory.DeciderOf(e.DecidedBy)
		}
		if e.RulesApplied != nil {
			out.RulesApplied = ptr.To(int(*e.RulesApplied))
		}
	}
	return out
}

func healthHook(h *v1alpha1.HookEntry) syncapi.HealthHook {
	return syncapi.HealthHook{
		Name:         h.Name,
		WorkloadKind: h.WorkloadKind,
		Namespace:    h.Namespace,
		WorkloadName: h.WorkloadName,
		State:        h.State,
		Message:      h.Message,
		CreatedAt:    timeOrNil(h.CreatedAt),
		FinishedAt:   timeOrNil(h.FinishedAt),
		Timeout:      h.Timeout,
	}
}

// timeOrNil returns a copy of t, or nil when t is unset or zero: /health answers null
// for both.
func timeOrNil(t *metav1.Time) *metav1.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	c := *t
	return &c
}
