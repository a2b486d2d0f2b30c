package v1alpha1

import (
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncRequestedAtAnnotation is set on a Release by the /sync endpoint, with the time of
// the request in RFC 3339 with nanoseconds. Its change wakes the controller-manager.
const SyncRequestedAtAnnotation = "convoy.kumodo.io/sync-requested-at"

// ConditionHealthy is the condition type that the observer owns on a Release.
const ConditionHealthy = "Healthy"

// Reasons of the Healthy condition (docs/design.md, "Healthy condition").
const (
	ReasonNotConfigured = "NotConfigured"
	ReasonUnknown       = "Unknown"
	ReasonPending       = "Pending"
	ReasonDegraded      = "Degraded"
	ReasonProgressing   = "Progressing"
	ReasonHealthy       = "Healthy"
)

// ClusterReference names a Cluster in the namespace of the Release.
type ClusterReference struct {
	// name of the Cluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// HealthAssessment configures how the observer assesses the objects of a Release.
type HealthAssessment struct {
	// globalRuleSetSelector selects GlobalHealthRuleSets by label. Absent selects none,
	// {} selects all.
	// +optional
	GlobalRuleSetSelector *metav1.LabelSelector `json:"globalRuleSetSelector,omitempty"`

	// localRuleSetSelector selects HealthRuleSets of the Release's own namespace by label.
	// Absent selects none, {} selects all.
	// +optional
	LocalRuleSetSelector *metav1.LabelSelector `json:"localRuleSetSelector,omitempty"`

	// deadline is how long an object may fail its rules, counted from its firstUnhealthy
	// time, before it is Degraded rather than Progressing (for example "5m"). Absent: a
	// failing object stays Progressing.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 5m or 90s"
	Deadline *metav1.Duration `json:"deadline,omitempty"`

	// failFast, when true, makes a failing workload (a Deployment, StatefulSet,
	// DaemonSet, ReplicaSet or Job) Degraded at once, with decidedBy.cause FailedFast,
	// when its diagnosis is terminal: one of its current Pods cannot pull or name its
	// image, cannot have its container configuration made, crash-loops after 3 restarts
	// or more, or cannot be scheduled (and it keeps that cause past the deadline).
	// Absent or false: states are exactly as the rules and the deadline give them; the
	// diagnosis is recorded either way.
	// +optional
	FailFast *bool `json:"failFast,omitempty"`
}

// GetFailFast returns spec.healthAssessment.failFast of ha; false when ha or the field
// is absent.
func (ha *HealthAssessment) GetFailFast() bool {
	return ha != nil && ha.FailFast != nil && *ha.FailFast
}

// SyncPolicy holds the timing of the Release's loops.
type SyncPolicy struct {
	// interval is the longest delay between two health passes while something is
	// pending, and the period of the idle re-check (for example "1m"). At least 1s, so
	// that no Release can make the observer poll its API servers in a hot loop.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="must be a duration of at least 1s, such as 30s or 5m"
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// ReleaseSpec is the desired state of a Release. The observer reads only clusterRef,
// healthAssessment and syncPolicy; the other fields belong to the controller-manager.
type ReleaseSpec struct {
	// clusterRef names the target Cluster, in the Release's namespace.
	// +required
	ClusterRef ClusterReference `json:"clusterRef"`

	// healthAssessment configures the health rules. Absent: the Release is Healthy with
	// reason NotConfigured.
	// +optional
	HealthAssessment *HealthAssessment `json:"healthAssessment,omitempty"`

	// syncPolicy holds the timing of the loops.
	// +optional
	SyncPolicy *SyncPolicy `json:"syncPolicy,omitempty"`

	// source is what the controller-manager renders. Its shape belongs to the
	// controller-manager; the observer never reads it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Source *apiextensionsv1.JSON `json:"source,omitempty"`
}

// AttemptStatus describes the render that the controller-manager last tried to apply.
type AttemptStatus struct {
	// renderRef identifies the render.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RenderRef string `json:"renderRef,omitempty"`
}

// RolloutStatus describes the rollout in progress.
type RolloutStatus struct {
	// startedAt is when the rollout started (RFC 3339).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
}

// HealthSummary counts the inventory entries of a Release by state.
//
// +k8s:openapi-gen=true
type HealthSummary struct {
	// total is the number of inventory entries.
	Total int32 `json:"total"`
	// healthy is the number of Healthy entries.
	Healthy int32 `json:"healthy"`
	// progressing is the number of Progressing entries.
	Progressing int32 `json:"progressing"`
	// degraded is the number of Degraded entries.
	Degraded int32 `json:"degraded"`
	// unknown is the number of Unknown entries.
	Unknown int32 `json:"unknown"`
}

// ReleaseStatus is the observed state of a Release.
type ReleaseStatus struct {
	// lastAttempted is the render that the controller-manager last applied.
	// +optional
	LastAttempted *AttemptStatus `json:"lastAttempted,omitempty"`

	// rollout is the rollout in progress.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// conditions of the Release. The observer owns the type Healthy.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// healthSummary counts the inventory entries by state. Written with the Healthy
	// condition.
	// +optional
	HealthSummary *HealthSummary `json:"healthSummary,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=convoy
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="Healthy")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Healthy")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Release is one delivery of convoy to one target Cluster.
type Release struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec ReleaseSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status ReleaseStatus `json:"status,omitempty"`
}

// GetDeadline returns spec.healthAssessment.deadline, and false when it is not set.
func (r *Release) GetDeadline() (time.Duration, bool) {
	if r.Spec.HealthAssessment == nil || r.Spec.HealthAssessment.Deadline == nil {
		return 0, false
	}
	return r.Spec.HealthAssessment.Deadline.Duration, true
}

// MinInterval is the shortest syncPolicy.interval that the loops honour.
const MinInterval = time.Second

// GetInterval returns spec.syncPolicy.interval, at least MinInterval, and false when it
// is not set or not positive.
func (r *Release) GetInterval() (time.Duration, bool) {
	if r.Spec.SyncPolicy == nil || r.Spec.SyncPolicy.Interval == nil || r.Spec.SyncPolicy.Interval.Duration <= 0 {
		return 0, false
	}
	return max(r.Spec.SyncPolicy.Interval.Duration, MinInterval), true
}

// GetLastAttemptedRenderRef returns status.lastAttempted.renderRef, or "".
func (r *Release) GetLastAttemptedRenderRef() string {
	if r.Status.LastAttempted == nil {
		return ""
	}
	return r.Status.LastAttempted.RenderRef
}

// +kubebuilder:object:root=true

// ReleaseList is a list of Release.
type ReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Release `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&Release{}, &ReleaseList{}))
}
