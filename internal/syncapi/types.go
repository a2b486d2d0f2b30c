package syncapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
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
	// DecidedByError says why some assessed entries have neither decidedBy nor
	// rulesApplied: the observer that assessed them did not record these fields yet (an
	// older version), so /health has nothing to show until its next pass writes them;
	// "" when every assessed entry carries them.
	// A field added to HealthResult after its first version (clients ignore fields
	// they do not know).
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
	// DecidedBy names the rule that decided the entry's state and why, for an entry
	// that is not Healthy: {"kind","namespace","name","rule","cause"}, the rule set's
	// kind (GlobalHealthRuleSet or HealthRuleSet), namespace ("" for a global set) and
	// name, the 0-based index of the rule in its spec.rules, and the cause RuleFailed
	// (Progressing), DeadlinePassed (a failing rule, Degraded because the deadline
	// passed), Failed (a failing rule whose failedExpression says the failure is
	// terminal, Degraded at once) or EvaluationError (Unknown). The observer records it in the inventory
	// entry with the state, at the same assessment; null for a Healthy or unassessed
	// entry, one that no rule decided (its object is missing or unreadable, or the pass
	// could not evaluate it), or one the observer has not recorded it for yet (see
	// DecidedByError).
	// A field added to HealthResult after its first version (clients ignore fields
	// they do not know).
	// +nullable
	DecidedBy *health.Decider `json:"decidedBy"`
	// RulesApplied is the number of rules that the Release selected at the observer's
	// last assessment and whose apiVersion (or apiVersion pattern) and resources (or
	// "*") match the entry's apiVersion and resource, as health.Evaluator.RulesApplied
	// counts them: 0 means no rule judges the object, so Healthy only says that nothing
	// failed. It is 0 for every entry of a Release without spec.healthAssessment
	// (nothing is selected). The observer records it in the inventory entry; null for
	// an unassessed entry or one the observer has not recorded it for yet (see
	// DecidedByError).
	// A field added to HealthResult after its first version (clients ignore fields
	// they do not know).
	// +nullable
	RulesApplied *int `json:"rulesApplied"`
	// Diagnosis is why a workload entry that is not Healthy fails, from its current
	// Pods, as the observer recorded it (the inventory entry's diagnosis): the Pod and
	// its scheduling failure, container waiting reason, last termination or failing
	// readiness, in one line of at most 1024 characters; "" when there is none.
	// A field added to HealthResult after its first version (clients ignore fields
	// they do not know).
	Diagnosis string `json:"diagnosis"`
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

// SyncResponse is the body of a 202 answer of POST …/releases/{name}/sync.
//
// +k8s:openapi-gen=true
type SyncResponse struct {
	// Release is "namespace/name".
	Release string `json:"release"`
	// SyncRequestedAt is the value written to the convoy.kumodo.io/sync-requested-at
	// annotation (RFC 3339 with nanoseconds, UTC).
	SyncRequestedAt string `json:"syncRequestedAt"`
}

// SyncTimeFormat is the layout of the sync annotation: RFC 3339 with all nine digits of
// nanoseconds (time.RFC3339Nano drops trailing zeros), so two requests within one second
// always differ and every value parses with time.RFC3339Nano.
const SyncTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// The bodies are runtime.Objects for k8s.io/apiserver's serializers, without apiVersion
// and kind: their object kind is empty, so the answer is exactly the struct's JSON.

// GetObjectKind is empty: the body carries no apiVersion or kind.
func (*SyncResponse) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the response.
func (in *SyncResponse) DeepCopyObject() runtime.Object { out := *in; return &out }

// GetObjectKind is empty: the body carries no apiVersion or kind.
func (*HealthResult) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the result, its entries and hooks included.
func (in *HealthResult) DeepCopyObject() runtime.Object {
	out := *in
	out.Entries = append([]HealthEntry(nil), in.Entries...)
	for i, e := range in.Entries {
		if e.FirstUnhealthy != nil {
			e.FirstUnhealthy = e.FirstUnhealthy.DeepCopy()
		}
		if e.DecidedBy != nil {
			d := *e.DecidedBy
			e.DecidedBy = &d
		}
		if e.RulesApplied != nil {
			n := *e.RulesApplied
			e.RulesApplied = &n
		}
		out.Entries[i] = e
	}
	out.Hooks = append([]HealthHook(nil), in.Hooks...)
	for i, h := range in.Hooks {
		h.CreatedAt, h.FinishedAt = h.CreatedAt.DeepCopy(), h.FinishedAt.DeepCopy()
		out.Hooks[i] = h
	}
	return &out
}
