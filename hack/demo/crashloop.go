package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// crashLabel marks the Pods of the crash-looping render r4. kwok runs no container, so
// the demo plays the kubelet for them (crashLoop): their container keeps crashing.
const crashLabel = "demo.convoy.kumodo.io/simulate"

// crashRender is r4: the Deployment's new image crashes at start (exit code 1), so its
// container restarts in CrashLoopBackOff. The other objects are as in r1.
func crashRender(ref string) *render {
	return &render{Ref: ref, Objects: objects("3", nil, map[string]string{crashLabel: "crash-loop"})}
}

// crashLoop plays the kubelet for the Pods labelled crashLabel in the demo namespace
// until ctx ends: every pollInterval it writes, on each such Pod that kwok scheduled,
// that is at least after old (creationTimestamp has whole seconds: a Pod may crash up
// to a second sooner) and that does not show it yet, the status of a container
// that exited 1 five times and waits in CrashLoopBackOff. With after 0 a Pod crashes as
// soon as it is scheduled; a real container starts, runs and exits a few times first,
// which after plays (--crash-after): the observer's first pass at r4 then sees the new
// Pods start, and a later pass decides Degraded.
func crashLoop(ctx context.Context, c client.Client, after time.Duration) {
	tick := time.NewTicker(pollInterval / 2)
	defer tick.Stop()
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(demoNamespace), client.HasLabels{crashLabel}); err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || crashing(p) || time.Since(p.CreationTimestamp.Time) < after {
					continue
				}
				p.Status = crashStatus(p)
				if err := c.Status().Update(ctx, p); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					fmt.Printf("demo: simulating the crash loop of Pod %s: %v\n", p.Name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// crashing reports whether p already shows the crash loop.
func crashing(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff" {
			return true
		}
	}
	return false
}

// crashStatus is the status a kubelet reports for p once its container crashed five
// times: Running, not Ready, the container waiting in CrashLoopBackOff.
func crashStatus(p *corev1.Pod) corev1.PodStatus {
	now := metav1.Now()
	st := p.Status
	st.Phase = corev1.PodRunning
	st.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now},
	}
	st.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, RestartCount: 5,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: "back-off 2m40s restarting failed container=" + c.Name}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1,
				StartedAt: now, FinishedAt: now}},
		})
	}
	return st
}

// setFailFast turns spec.healthAssessment.failFast on for the demo's Release (as its
// user would, with the same rules and deadline).
func setFailFast(ctx context.Context, c client.Client) error {
	ac := acv1alpha1.Release(releaseName, demoNamespace).WithSpec(acv1alpha1.ReleaseSpec().
		WithClusterRef(acv1alpha1.ClusterReference().WithName(clusterName)).
		WithHealthAssessment(acv1alpha1.HealthAssessment().
			WithGlobalRuleSetSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"convoy.kumodo.io/default": "true"})).
			WithDeadline(metav1.Duration{Duration: healthDeadline}).
			WithFailFast(true)).
		WithSyncPolicy(acv1alpha1.SyncPolicy().WithInterval(metav1.Duration{Duration: syncInterval})))
	if err := c.Apply(ctx, ac, client.FieldOwner(userManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("turning failFast on for Release %s/%s: %w", demoNamespace, releaseName, err)
	}
	return nil
}

// deploymentFailedFast holds when the Deployment of r is Degraded at r.Ref with cause
// FailedFast and a diagnosis, and the Healthy condition is False with reason Degraded.
func (s *scenario) deploymentFailedFast(r *render) condFunc {
	return func(snap *snapshot) ([]string, error) {
		var missing []string
		e := snap.entry("Deployment", demoNamespace, deployName)
		name := "Deployment " + objectName(demoNamespace, deployName)
		switch {
		case e == nil || e.AssessedRenderRef != r.Ref || e.State != v1alpha1.StateDegraded:
			missing = append(missing, entryMissing(snap, object{Kind: "Deployment", Namespace: demoNamespace, Name: deployName}, r.Ref, v1alpha1.StateDegraded))
		case e.DecidedBy == nil || e.DecidedBy.Cause != health.CauseFailedFast || e.Diagnosis == "":
			missing = append(missing, fmt.Sprintf("%s Degraded by failFast with a diagnosis (decided by %+v, diagnosis %q)", name, e.DecidedBy, e.Diagnosis))
		}
		if m := conditionMissing(snap, metav1.ConditionFalse, v1alpha1.ReasonDegraded); m != "" {
			missing = append(missing, m)
		}
		return missing, nil
	}
}
