package syncapi

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// HealthResult is the body of GET …/releases/{name}/health (docs/design.md, "Sync and
// health endpoints"). Every field is always serialized; entries and hooks are [] rather
// than null when there are none.
//
// +k8s:openapi-gen=true
type HealthResult struct {
	// Release is "namespace/name".
	Release string `json:"release"`
	// RenderCurrent is true when every entry's renderRef equals the Release's
	// status.lastAttempted.renderRef (true for no entries).
	RenderCurrent bool `json:"renderCurrent"`
	// Summary counts the entries by state; an entry not assessed yet counts as unknown.
	Summary v1alpha1.HealthSummary `json:"summary"`
	// Entries are the inventory entries that the controller-manager records, sorted by
	// wave, then group, kind, namespace and name.
	// +listType=atomic
	Entries []HealthEntry `json:"entries"`
	// Hooks are the hooks that the controller-manager records, sorted by name.
	// +listType=atomic
	Hooks []HealthHook `json:"hooks"`
	// DecidedByError says why some entries that are not Healthy have no decidedBy
	// although a rule may decide them (for example the rules do not compile, the
	// target cannot be read, or more entries than one request explains), or why the
	// entries have no rulesApplied (the rule sets cannot be listed or do not compile);
	// "" when every such entry was explained or no explanation was asked for. Added to
	// the contract's HealthResult (it may gain fields).
	DecidedByError string `json:"decidedByError"`
}

// HealthEntry is one inventory entry of a HealthResult. All fields are serialized,
// empty ones included: group is "" for the core group, namespace is "" for a
// cluster-scoped object, state is "" until the observer has assessed the entry, and
// firstUnhealthy is null while the entry is not failing.
//
// +k8s:openapi-gen=true
type HealthEntry struct {
	// Group of the object; "" for the core group.
	Group string `json:"group"`
	// Version of the object as applied.
	Version string `json:"version"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object; "" for a cluster-scoped object.
	Namespace string `json:"namespace"`
	// Name of the object.
	Name string `json:"name"`
	// Wave is the apply wave (0 when the inventory does not set one).
	Wave int32 `json:"wave"`
	// State is the observer's assessment, or "" before the first one.
	State v1alpha1.HealthState `json:"state"`
	// Message says why the object is not Healthy.
	Message string `json:"message"`
	// FirstUnhealthy is when the object first failed its rules since it last passed;
	// null when unset.
	// +nullable
	FirstUnhealthy *metav1.Time `json:"firstUnhealthy"`
	// RenderRef is the render that applied the object.
	RenderRef string `json:"renderRef"`
	// AssessedRenderRef is the entry's renderRef at the observer's last assessment.
	AssessedRenderRef string `json:"assessedRenderRef"`
	// DecidedBy names the rule that decides the entry now and why, for an entry that
	// is not Healthy: {"kind","namespace","name","rule","cause"}, the rule set's kind
	// (GlobalHealthRuleSet or HealthRuleSet), namespace ("" for a global set) and name,
	// the 0-based index of the rule in its spec.rules, and the cause RuleFailed
	// (Progressing), DeadlinePassed (a failing rule, Degraded because the deadline
	// passed) or EvaluationError (Unknown). It is computed on demand by re-evaluating
	// the rules against the live object (Explainer), never stored; null for a Healthy
	// or unassessed entry, one that no rule decides (its object is missing or
	// unreadable, or it passes now), or when the server does not explain (see
	// DecidedByError). Added to the contract's HealthResult (it may gain
	// fields).
	// +nullable
	DecidedBy *health.Decider `json:"decidedBy"`
	// RulesApplied is the number of rules that the Release selects now and whose
	// apiVersion (or apiVersion pattern) and resources (or "*") match the entry's
	// apiVersion and resource, as health.Evaluator.RulesApplied counts them: 0 means no
	// rule judges the object, so Healthy only says that nothing failed. It is 0 for every
	// entry of a Release without spec.healthAssessment (nothing is selected). Computed
	// per request from the selected rule sets (Explainer), never stored; null when the
	// server does not compute it or cannot (the rule sets cannot be listed or do not
	// compile: DecidedByError says why). Added to the contract's HealthResult (it may
	// gain fields).
	// +nullable
	RulesApplied *int `json:"rulesApplied"`
}

// HealthHook is one lifecycle hook of a HealthResult: the fields of a
// v1alpha1.HookEntry, all serialized. Times are null when unset; timeout is the
// recorded duration string, "" when the inventory leaves it empty (which means 10m).
//
// +k8s:openapi-gen=true
type HealthHook struct {
	// Name of the hook.
	Name string `json:"name"`
	// WorkloadKind is Job or Pod.
	WorkloadKind string `json:"workloadKind"`
	// Namespace of the workload in the target cluster.
	Namespace string `json:"namespace"`
	// WorkloadName is the name of the workload in the target cluster.
	WorkloadName string `json:"workloadName"`
	// CreatedAt is when the controller-manager (re-)armed the hook.
	// +nullable
	CreatedAt *metav1.Time `json:"createdAt"`
	// Timeout is the recorded timeout (for example "10m0s"), or "".
	Timeout string `json:"timeout"`
	// State is Running, Succeeded or Failed, or "" before the first poll.
	State v1alpha1.HookState `json:"state"`
	// Message says why the hook failed or what it waits for.
	Message string `json:"message"`
	// FinishedAt is when the state turned terminal.
	// +nullable
	FinishedAt *metav1.Time `json:"finishedAt"`
}

// BuildHealthResult builds the /health response of rel from inv without assessing anything
// (docs/design.md, "The write protocol"). inv may be nil (no inventory yet): the result then
// has no entries, no hooks and a zero summary. Only the entries and hooks that the
// controller-manager still records count (inventory.RecordedEntries), so an entry that
// the controller-manager dropped vanishes even while the observer's fields keep it in
// the object. The error is about unreadable managedFields of inv.
func BuildHealthResult(rel *v1alpha1.Release, inv *v1alpha1.ReleaseInventory) (HealthResult, error) {
	if rel == nil {
		return HealthResult{}, errors.New("no release")
	}
	resp := HealthResult{
		Release: rel.Namespace + "/" + rel.Name,
		Entries: []HealthEntry{},
		Hooks:   []HealthHook{},
	}
	var entries []v1alpha1.InventoryEntry
	var hooks []v1alpha1.HookEntry
	if inv != nil {
		var err error
		if entries, _, err = inventory.RecordedEntries(inv, ""); err != nil {
			return HealthResult{}, fmt.Errorf("reading the entries of ReleaseInventory %s/%s: %w", inv.Namespace, inv.Name, err)
		}
		if hooks, _, err = inventory.RecordedHooks(inv, ""); err != nil {
			return HealthResult{}, fmt.Errorf("reading the hooks of ReleaseInventory %s/%s: %w", inv.Namespace, inv.Name, err)
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
	slices.SortFunc(resp.Entries, func(a, b HealthEntry) int { return health.CompareEntries(a.position(), b.position()) })
	slices.SortFunc(resp.Hooks, func(a, b HealthHook) int { return cmp.Compare(a.Name, b.Name) })
	return resp, nil
}

// position is where the entry stands in the order of /health (health.CompareEntries).
func (e *HealthEntry) position() health.EntryPosition {
	return health.EntryPosition{Wave: e.Wave, Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}
}

func healthEntry(e *v1alpha1.InventoryEntry) HealthEntry {
	out := HealthEntry{
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
	}
	if e.FirstUnhealthy != nil && !e.FirstUnhealthy.IsZero() {
		t := *e.FirstUnhealthy
		out.FirstUnhealthy = &t
	}
	return out
}

func healthHook(h *v1alpha1.HookEntry) HealthHook {
	out := HealthHook{
		Name:         h.Name,
		WorkloadKind: h.WorkloadKind,
		Namespace:    h.Namespace,
		WorkloadName: h.WorkloadName,
		State:        h.State,
		Message:      h.Message,
	}
	if h.CreatedAt != nil && !h.CreatedAt.IsZero() {
		t := *h.CreatedAt
		out.CreatedAt = &t
	}
	if h.FinishedAt != nil && !h.FinishedAt.IsZero() {
		t := *h.FinishedAt
		out.FinishedAt = &t
	}
	if h.Timeout != "" {
		out.Timeout = h.Timeout
	}
	return out
}

// OpenAPIModelPrefix starts the OpenAPI model names of the group's types (convoy-api's
// OpenAPI document).
const OpenAPIModelPrefix = "com.kumodo.convoy.subresources.v1alpha1."

// OpenAPIModelName names SyncResponse in OpenAPI.
func (SyncResponse) OpenAPIModelName() string { return OpenAPIModelPrefix + "SyncResponse" }

// OpenAPIModelName names HealthResult in OpenAPI, by its kind in discovery.
func (HealthResult) OpenAPIModelName() string { return OpenAPIModelPrefix + "HealthResponse" }

// OpenAPIModelName names HealthEntry in OpenAPI.
func (HealthEntry) OpenAPIModelName() string { return OpenAPIModelPrefix + "HealthEntry" }

// OpenAPIModelName names HealthHook in OpenAPI.
func (HealthHook) OpenAPIModelName() string { return OpenAPIModelPrefix + "HealthHook" }
