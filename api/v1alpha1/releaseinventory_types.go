package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HealthState is the health of one inventory entry (docs/design.md, "State").
// +kubebuilder:validation:Enum=Healthy;Progressing;Degraded;Unknown
type HealthState string

// The four health states.
const (
	StateHealthy     HealthState = "Healthy"
	StateProgressing HealthState = "Progressing"
	StateDegraded    HealthState = "Degraded"
	StateUnknown     HealthState = "Unknown"
)

// HookState is the state of one lifecycle hook's workload.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed
type HookState string

// The three hook states; Succeeded and Failed are terminal.
const (
	HookRunning   HookState = "Running"
	HookSucceeded HookState = "Succeeded"
	HookFailed    HookState = "Failed"
)

// IsTerminal reports whether s is Succeeded or Failed.
func (s HookState) IsTerminal() bool { return s == HookSucceeded || s == HookFailed }

// MaxMessageLength is the longest entry or hook message, in characters.
const MaxMessageLength = 1024

// DefaultHookTimeout is the timeout of a hook whose timeout is empty.
const DefaultHookTimeout = 10 * time.Minute

// InventoryEntry is one object that the controller-manager applied to the target
// cluster, with the observer's assessment of it. The four keys are always serialized
// ("" for the core group and for cluster-scoped objects), so Server-Side Apply keys an
// entry the same way whoever sends it.
type InventoryEntry struct {
	// group of the object; "" for the core group.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group"`

	// kind of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// namespace of the object; "" for a cluster-scoped object.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// version of the object as applied. Rules match apiVersion group/version, or
	// version alone for the core group. Owned by the controller-manager.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version,omitempty"`

	// resource is the plural lowercase resource of the object; rules match resources.
	// Owned by the controller-manager.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Resource string `json:"resource,omitempty"`

	// wave is the apply wave of the object. Owned by the controller-manager.
	// +optional
	Wave *int32 `json:"wave,omitempty"`

	// renderRef is the render that applied this object. Owned by the controller-manager.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RenderRef string `json:"renderRef,omitempty"`

	// state is the observer's assessment.
	// +optional
	State HealthState `json:"state,omitempty"`

	// message says why the object is not Healthy; at most 1024 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// firstUnhealthy is when the object first failed its rules since it last passed.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	FirstUnhealthy *metav1.Time `json:"firstUnhealthy,omitempty"`

	// assessedRenderRef is the renderRef of the entry when the observer assessed it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AssessedRenderRef string `json:"assessedRenderRef,omitempty"`

	// decidedBy names the health rule that decided the state of an entry that is not
	// Healthy, as of the observer's last assessment; absent for a Healthy entry and for
	// one that no rule decided (its object is missing or unreadable, or the pass could
	// not evaluate it). Written by the observer under the field manager
	// convoy-health-inventory, like state and message; convoy-api's /health shows it as
	// the entry's decidedBy.
	// +optional
	DecidedBy *EntryDecider `json:"decidedBy,omitempty"`

	// rulesApplied is how many of the rules that the Release selected at the observer's
	// last assessment match the entry's apiVersion and resource (whether or not the
	// evaluation reached them): 0 means that no rule judges the object. Written by the
	// observer under the field manager convoy-health-inventory on every entry it
	// assesses; absent before the first assessment by an observer that records it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RulesApplied *int32 `json:"rulesApplied,omitempty"`

	// diagnosis says in one line why a workload entry (a Deployment, StatefulSet,
	// DaemonSet, ReplicaSet or Job) that is not Healthy fails, from its current Pods:
	// the Pod, and its scheduling failure, its container's waiting reason, its last
	// termination or its failing readiness; at most 1024 characters. Absent on Healthy
	// entries, on other kinds and when no current Pod shows a cause. Written by the
	// observer under the field manager convoy-health-inventory, like state and message.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Diagnosis string `json:"diagnosis,omitempty"`
}

// EntryDecider is the rule that decided an entry's state (InventoryEntry.decidedBy): the
// rule set, the rule's index in it and the cause. All five fields are always serialized
// (namespace is "" for a GlobalHealthRuleSet). It has the fields of health.Decider, the
// decidedBy of convoy-api's /health and of convoyctl health eval.
// +structType=atomic
type EntryDecider struct {
	// kind of the rule set: GlobalHealthRuleSet or HealthRuleSet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// namespace of a HealthRuleSet; "" for a GlobalHealthRuleSet.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name of the rule set.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// rule is the 0-based index of the rule in the set's spec.rules.
	// +required
	// +kubebuilder:validation:Minimum=0
	Rule int32 `json:"rule"`

	// cause is how the rule decided: RuleFailed (its ruleExpression returned false,
	// Progressing), DeadlinePassed (it failed past spec.healthAssessment.deadline,
	// Degraded), Failed (it failed and its failedExpression says the failure is terminal,
	// Degraded at once), FailedFast (it failed and the entry's diagnosis is terminal
	// under spec.healthAssessment.failFast, Degraded at once) or EvaluationError (it
	// could not be evaluated, Unknown).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Cause string `json:"cause"`
}

// GetWave returns wave, or 0 when it is not set.
func (e *InventoryEntry) GetWave() int32 {
	if e.Wave == nil {
		return 0
	}
	return *e.Wave
}

// APIVersion returns group/version, or version alone for the core group.
func (e *InventoryEntry) APIVersion() string {
	if e.Group == "" {
		return e.Version
	}
	return e.Group + "/" + e.Version
}

// HookEntry is one lifecycle hook whose workload (a Job or a Pod) runs on the target.
type HookEntry struct {
	// name of the hook.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// workloadKind is Job or Pod.
	// +optional
	// +kubebuilder:validation:Enum=Job;Pod
	WorkloadKind string `json:"workloadKind,omitempty"`

	// namespace of the workload in the target cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// workloadName is the name of the workload in the target cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	WorkloadName string `json:"workloadName,omitempty"`

	// createdAt is when the controller-manager (re-)armed the hook.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`

	// timeout counted from createdAt, as a duration string such as "10m" or "90s";
	// empty means 10m. It is a plain string (not a metav1.Duration) so that the empty
	// value decodes; admission rejects anything else that is not a positive duration.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == '' || duration(self) > duration('0s')",message="must be empty or a positive duration such as 10m or 90s"
	Timeout string `json:"timeout,omitempty"`

	// state of the workload, written by the observer.
	// +optional
	State HookState `json:"state,omitempty"`

	// message says why the hook failed or what it waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// finishedAt is when the state turned terminal.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// GetTimeout returns timeout, or DefaultHookTimeout when it is empty, not positive or
// not a duration (admission rejects the last two).
func (h *HookEntry) GetTimeout() time.Duration {
	d, err := time.ParseDuration(h.Timeout)
	if h.Timeout == "" || err != nil || d <= 0 {
		return DefaultHookTimeout
	}
	return d
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=convoy,shortName=rinv

// ReleaseInventory records the objects and hooks that the controller-manager applied
// for the Release of the same name, and the observer's assessment of each. It has no
// status subresource: both writers apply to the top-level lists with Server-Side Apply.
type ReleaseInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// entries are the applied objects, keyed by group, kind, namespace and name.
	// +optional
	// +listType=map
	// +listMapKey=group
	// +listMapKey=kind
	// +listMapKey=namespace
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10000
	Entries []InventoryEntry `json:"entries,omitempty"`

	// hooks are the lifecycle hooks, keyed by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Hooks []HookEntry `json:"hooks,omitempty"`
}

// +kubebuilder:object:root=true

// ReleaseInventoryList is a list of ReleaseInventory.
type ReleaseInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReleaseInventory `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&ReleaseInventory{}, &ReleaseInventoryList{}))
}
