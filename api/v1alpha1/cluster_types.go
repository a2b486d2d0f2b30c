package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultKubeconfigKey is the key of the kubeconfig in its Secret when
// spec.kubeconfigSecretRef.key is empty.
const DefaultKubeconfigKey = "value"

// SecretKeyReference names a key of a Secret in the Cluster's namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key of the kubeconfig in the Secret's data. Empty means "value".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// GetKey returns key, or DefaultKubeconfigKey when it is empty.
func (r *SecretKeyReference) GetKey() string {
	if r == nil || r.Key == "" {
		return DefaultKubeconfigKey
	}
	return r.Key
}

// ClusterSpec describes how to reach a target cluster.
type ClusterSpec struct {
	// kubeconfigSecretRef names a Secret holding a kubeconfig for the target. Absent: the
	// target is the cluster that the observer runs in.
	// +optional
	KubeconfigSecretRef *SecretKeyReference `json:"kubeconfigSecretRef,omitempty"`

	// shard is the shard this Cluster belongs to; "" is the default shard. Only the
	// observer replicas that own the shard assess the Releases of this Cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Shard string `json:"shard,omitempty"`

	// serviceAccountName is a ServiceAccount of the Cluster's namespace whose identity
	// reads the objects of the Cluster's Releases (inventory entries, hook Jobs and Pods):
	// the observer impersonates system:serviceaccount:<namespace>:<serviceAccountName>,
	// so a Release never reads more than that ServiceAccount may. Empty: on the cluster
	// the observer runs in (no kubeconfigSecretRef), the ServiceAccount of the observer's
	// --default-service-account flag (convoy-health-reader by default); through a
	// kubeconfig, the kubeconfig's own identity. The ServiceAccount needs get, list and
	// watch on what its Releases record (docs/security.md).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=convoy
// +kubebuilder:printcolumn:name="Shard",type=string,JSONPath=`.spec.shard`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Cluster is a target cluster of convoy.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says how to reach the cluster.
	// +optional
	Spec ClusterSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterList is a list of Cluster.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&Cluster{}, &ClusterList{}))
}
