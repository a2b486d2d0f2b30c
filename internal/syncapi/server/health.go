package server

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

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
// the object. The error is about unreadable managedFields of inv.
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
	for i := range entries {
		resp.Entries = append(resp.Entries, healthEntry(&entries[i]))
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

func healthEntry(e *v1alpha1.InventoryEntry) syncapi.HealthEntry {
	return syncapi.HealthEntry{
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
		FirstUnhealthy:    timeOrNil(e.FirstUnhealthy),
	}
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
