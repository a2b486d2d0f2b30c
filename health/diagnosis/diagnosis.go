// Package diagnosis says, in one line, why a workload that is not Healthy fails: it
// finds the workload's current Pods through owner references (a Deployment's newest
// ReplicaSet, a StatefulSet's update revision, the Pods a DaemonSet, ReplicaSet or Job
// controls) and names the first Pod with a cause — its scheduling failure, a container's
// waiting reason and message, its last termination, or its failing readiness
// (docs/design.md, "Diagnosis").
//
// The package is pure: it reads through a ListFunc that the caller gives (the health
// loop lists from the target cluster as the Release's read identity; convoyctl health
// eval filters the objects of its files), and holds no client and no clock.
package diagnosis

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// MaxMessage is the length bound of a Diagnosis message, in characters (the
// inventory's entries[].diagnosis).
const MaxMessage = 1024

// Pods and ReplicaSets are the resources a diagnosis lists.
var (
	Pods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	ReplicaSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
)

// ListFunc lists the objects of gvr (Pods or ReplicaSets) in namespace whose labels
// match selector; it may return fewer than all of them (the loop reads one bounded
// page). An error ends the diagnosis with that error.
type ListFunc func(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error)

// Diagnosis is why a workload fails, from its current Pods.
type Diagnosis struct {
	// Message is one line, at most MaxMessage characters, that names the Pod (or the
	// ReplicaSet) and the cause; "" when no current Pod shows one.
	Message string
	// Terminal reports a cause that does not heal by waiting (Terminal's rule): with
	// spec.healthAssessment.failFast the entry is Degraded at once.
	Terminal bool
}

// Applies reports whether Diagnose reads anything for objects of group and kind:
// apps Deployments, StatefulSets, DaemonSets, ReplicaSets and batch Jobs.
func Applies(group, kind string) bool {
	switch group {
	case "apps":
		return kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" || kind == "ReplicaSet"
	case "batch":
		return kind == "Job"
	}
	return false
}

// Diagnose finds the current Pods of workload (an object that Applies to) with list and
// returns the first cause they show. A Job suspended or a Deployment paused on purpose
// says so, and nothing is listed. A workload without a selector, or with one that
// requires no label (empty, or only NotIn, != and DoesNotExist), is not diagnosed (it
// would list every Pod of its namespace): the Diagnosis is empty. Only list's errors are returned.
//
// The current Pods are those whose controller owner reference is the workload, by UID
// (by kind and name for objects without one): for a Deployment, its newest ReplicaSet
// by the deployment.kubernetes.io/revision annotation and that ReplicaSet's Pods; for a
// StatefulSet, those of status.updateRevision when it is set. They are taken by name; a Pod with a terminal cause comes before one with
// another cause. When a Deployment's newest ReplicaSet has no Pod with a cause, its
// ReplicaFailure condition (a Pod it cannot create: quota, admission) is the cause.
func Diagnose(ctx context.Context, workload *unstructured.Unstructured, list ListFunc) (Diagnosis, error) {
	gk := workload.GroupVersionKind().GroupKind()
	if !Applies(gk.Group, gk.Kind) {
		return Diagnosis{}, nil
	}
	if d := held(workload, gk.Kind); d.Message != "" {
		return d, nil
	}
	sel, ok := selectorOf(workload)
	if !ok {
		return Diagnosis{}, nil
	}
	ns, ow := workload.GetNamespace(), ownerOf(workload, gk.Kind)
	var newest *appsv1.ReplicaSet
	revision := ""
	switch gk.Kind {
	case "Deployment":
		rss, err := list(ctx, ReplicaSets, ns, sel)
		if err != nil {
			return Diagnosis{}, err
		}
		if newest = newestReplicaSet(rss, ow); newest == nil {
			return Diagnosis{}, nil
		}
		ow = ownerOf(newest, "ReplicaSet")
		if h := newest.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
			sel = withLabel(sel, appsv1.DefaultDeploymentUniqueLabelKey, h)
		}
	case "StatefulSet":
		revision, _, _ = unstructured.NestedString(workload.Object, "status", "updateRevision")
	}
	objs, err := list(ctx, Pods, ns, sel)
	if err != nil {
		return Diagnosis{}, err
	}
	pods := ownedPods(objs, ow, revision)
	d := FromPods(pods)
	if d.Message == "" && newest != nil {
		d = replicaFailure(newest)
	}
	if gk.Kind == "Job" {
		if failed := jobFailed(workload); failed != "" {
			if d.Message == "" {
				d.Message = Line("Job " + ns + "/" + workload.GetName() + " failed" + failed)
			}
			d.Terminal = true // its Pods are final: the Job will not run another
		}
	}
	return d, nil
}
