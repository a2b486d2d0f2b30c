package faults

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// job returns the hook Job name of the Release. Where the target's controllers run it,
// it is created suspended, so that the test chooses when it runs (completeJob).
func (r *release) job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: r.name + "-" + name, Namespace: r.ns},
		Spec: batchv1.JobSpec{Suspend: &r.rollsOut, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
}

// createJob creates job in the target cluster.
func (r *release) createJob(ctx context.Context, job *batchv1.Job) error {
	return retry(ctx, func() error {
		if err := r.target().Create(ctx, job.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
}

// completeJob lets the target's controllers run job (it resumes it: the Job controller
// creates its Pod, the scheduler binds it to a fake node, kwok runs it to Succeeded and
// the Job controller marks the Job Complete), or, without controllers, writes its status
// as the Job controller does when it succeeded.
func (r *release) completeJob(ctx context.Context, job *batchv1.Job) error {
	if r.rollsOut {
		return retry(ctx, func() error {
			return r.target().Patch(ctx, job.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`)))
		})
	}
	return retry(ctx, func() error {
		j := &batchv1.Job{}
		if err := r.target().Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: "SuccessCriteriaMet", Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now},
		}
		return r.target().Status().Update(ctx, j)
	})
}
