package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RuleSpec is one CEL health rule (docs/design.md, "Rules").
type RuleSpec struct {
	// apiVersion defines the target API group/version (ex. apps/v1, or v1 for the core
	// group) for resources being assessed. It may be a pattern: "*" (every apiVersion,
	// the core group's included), "GROUP/*" (every version of GROUP), "*/VERSION" (every
	// group, core included) or "*.SUFFIX/VERSION" and "*.SUFFIX/*" (every group that ends
	// with ".SUFFIX", not SUFFIX itself). A "*" anywhere else matches nothing.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	APIVersion string `json:"apiVersion"`

	// resources defines the list of resources of given group/version: plural, lowercase
	// resource names such as deployments, or "*" for every resource of the apiVersion.
	// +required
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Resources []string `json:"resources"`

	// ruleExpression is the inlined CEL expression to evaluate. It must return a bool;
	// true means that the resource passes. The only variable is object, the live resource.
	// Admission does not compile it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	RuleExpression string `json:"ruleExpression"`

	// messageExpression is the inlined CEL expression to evaluate for the health check
	// message when the rule fails. It must return a string.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	MessageExpression string `json:"messageExpression,omitempty"`

	// failedExpression is an optional inlined CEL expression, evaluated only when
	// ruleExpression returned false. It must return a bool; true means that the failure
	// is terminal: the resource is Degraded at once, whatever the Release's deadline, with
	// this rule's message (decidedBy.cause Failed). An object that fails a rule is
	// evaluated further only to find such a terminal failure among its other applicable
	// rules (the first one found decides). Without it, a failing rule makes the resource
	// Progressing until the deadline passes.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	FailedExpression string `json:"failedExpression,omitempty"`
}

// GlobalHealthRuleSetSpec defines the desired state of GlobalHealthRuleSet.
type GlobalHealthRuleSetSpec struct {
	// rules are evaluated in list order.
	// +required
	// +kubebuilder:validation:MaxItems=256
	Rules []RuleSpec `json:"rules"`
}

// HealthRuleSetSpec defines the desired state of HealthRuleSet. It is the same as
// GlobalHealthRuleSetSpec.
type HealthRuleSetSpec struct {
	// rules are evaluated in list order.
	// +required
	// +kubebuilder:validation:MaxItems=256
	Rules []RuleSpec `json:"rules"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=convoy
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// GlobalHealthRuleSet is a cluster-scoped set of CEL health rules. A Release uses it when
// its spec.healthAssessment.globalRuleSetSelector matches the set's labels.
type GlobalHealthRuleSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the rules.
	// +required
	Spec GlobalHealthRuleSetSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// GlobalHealthRuleSetList is a list of GlobalHealthRuleSet.
type GlobalHealthRuleSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalHealthRuleSet `json:"items"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=convoy
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// HealthRuleSet is a namespaced set of CEL health rules. A Release of the same namespace
// uses it when its spec.healthAssessment.localRuleSetSelector matches the set's labels.
type HealthRuleSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the rules.
	// +required
	Spec HealthRuleSetSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// HealthRuleSetList is a list of HealthRuleSet.
type HealthRuleSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HealthRuleSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&GlobalHealthRuleSet{}, &GlobalHealthRuleSetList{}, &HealthRuleSet{}, &HealthRuleSetList{}))
}
