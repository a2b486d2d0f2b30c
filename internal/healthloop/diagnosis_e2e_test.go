package healthloop

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// workloadRules: a Deployment passes when all its replicas are available, a Job when it
// succeeded; neither has a failedExpression, so only failFast and the diagnosis can make
// them Degraded before a deadline.
var workloadRules = []extv1alpha1.RuleSpec{{
	APIVersion: "apps/v1", Resources: []string{"deployments"},
	RuleExpression:    "object.?status.?availableReplicas.orValue(0) >= object.spec.replicas",
	MessageExpression: "'not available'",
}, {
	APIVersion: "batch/v1", Resources: []string{"jobs"},
	RuleExpression:    "object.?status.?succeeded.orValue(0) > 0",
	MessageExpression: "'job not complete'",
}}

// workloadRelease creates the HealthRuleSet "workloads" of workloadRules in f's
// namespace and the Release that selects it.
func (f *fixture) workloadRelease() {
	f.t.Helper()
	must(f.t, env.Client.Create(f.ctx, &extv1alpha1.HealthRuleSet{ObjectMeta: metav1.ObjectMeta{Name: "workloads", Namespace: f.ns},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: workloadRules}}))
	f.release(localRules(0), 0)
}

// TestDiagnosisAndFailFast runs the loop on the real API server (no controllers: the
// test writes the objects and statuses that the Deployment, ReplicaSet, Job and kubelet
// controllers would). A Deployment whose Pod crash-loops, one whose image cannot be
// pulled, one whose Pod cannot be scheduled, and a Job that failed: each entry records a
// diagnosis naming the current Pod and its reason, and is Progressing without failFast
// (no deadline), Degraded at once with cause FailedFast with it. A Pod of an older
// ReplicaSet is never the one named. Once the Pods are healthy the diagnosis is gone.
func TestDiagnosisAndFailFast(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.workloadRelease()

	crash := f.deploymentWithPod("crash", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", Image: "app:1", RestartCount: 5,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 2m40s restarting failed container=app"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}},
	}}})
	pull := f.deploymentWithPod("pull", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", Image: "app:nope",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "app:nope"`}},
	}}})
	unsched := f.deploymentWithPod("unsched", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.", LastTransitionTime: metav1.Now(),
	}}})
	jobPod := f.failedJob("migrate")
	f.inventory(
		cmEntry{group: "apps", version: "v1", kind: "Deployment", resource: "deployments", name: "crash", renderRef: "r1"},
		cmEntry{group: "apps", version: "v1", kind: "Deployment", resource: "deployments", name: "pull", renderRef: "r1"},
		cmEntry{group: "apps", version: "v1", kind: "Deployment", resource: "deployments", name: "unsched", renderRef: "r1"},
		cmEntry{group: "batch", version: "v1", kind: "Job", resource: "jobs", name: "migrate", renderRef: "r1"},
	)
	f.lastAttempted("r1")
	want := map[string]string{
		"crash":   "Pod " + f.ns + "/" + crash + ": container app waiting: CrashLoopBackOff: back-off 2m40s restarting failed container=app, 5 restarts; last terminated: Error (exit code 2)",
		"pull":    "Pod " + f.ns + "/" + pull + `: container app waiting: ImagePullBackOff: Back-off pulling image "app:nope"`,
		"unsched": "Pod " + f.ns + "/" + unsched + ": not scheduled: Unschedulable: 0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
		"migrate": "Pod " + f.ns + "/" + jobPod + ": failed: container m terminated: Error (exit code 3)",
	}
	check := func(state v1alpha1.HealthState, cause health.Cause) {
		t.Helper()
		for name, diag := range want {
			e := f.entry(name)
			if e.State != state || e.Diagnosis != diag || e.DecidedBy == nil || e.DecidedBy.Cause != string(cause) {
				t.Errorf("%s: %s %q diagnosis %q decided by %+v\nwant %s, cause %s, diagnosis %q", name, e.State, e.Message, e.Diagnosis, e.DecidedBy, state, cause, diag)
			}
		}
	}

	f.pass()
	check(v1alpha1.StateProgressing, health.CauseRuleFailed)

	rel := f.getRelease()
	rel.Spec.HealthAssessment.FailFast = ptr.To(true)
	must(t, env.Client.Update(f.ctx, rel))
	f.clock.Step(time.Second)
	f.pass()
	check(v1alpha1.StateDegraded, health.CauseFailedFast)
	f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonDegraded)

	// The Pods recover and the workloads are available: no diagnosis is left.
	for _, name := range []string{crash, pull, unsched} {
		p := &corev1.Pod{}
		must(t, env.Client.Get(f.ctx, clientKey(f.ns, name), p))
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		must(t, env.Client.Status().Update(f.ctx, p))
	}
	for _, name := range []string{"crash", "pull", "unsched"} {
		d := &appsv1.Deployment{}
		must(t, env.Client.Get(f.ctx, clientKey(f.ns, name), d))
		d.Status = appsv1.DeploymentStatus{Replicas: 1, AvailableReplicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1}
		must(t, env.Client.Status().Update(f.ctx, d))
		delete(want, name)
	}
	f.clock.Step(time.Second)
	f.pass()
	for _, name := range []string{"crash", "pull", "unsched"} {
		if e := f.entry(name); e.State != v1alpha1.StateHealthy || e.Diagnosis != "" {
			t.Errorf("%s: %s diagnosis %q, want Healthy without a diagnosis", name, e.State, e.Diagnosis)
		}
	}
	check(v1alpha1.StateDegraded, health.CauseFailedFast) // the Job stays failed
}

// deploymentWithPod creates the Deployment name (1 replica, none available), an old
// ReplicaSet of revision 1 whose Pod is healthy, its newest ReplicaSet of revision 2,
// and one Pod of the newest with status; it returns that Pod's name.
func (f *fixture) deploymentWithPod(name string, status corev1.PodStatus) string {
	f.t.Helper()
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	must(f.t, env.Client.Create(f.ctx, d))
	var newest string
	for rev, hash := range []string{"old", "new"} {
		l := map[string]string{"app": name, appsv1.DefaultDeploymentUniqueLabelKey: hash}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + hash, Namespace: f.ns, Labels: l,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": []string{"1", "2"}[rev]},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: l},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: spec}}}
		must(f.t, env.Client.Create(f.ctx, rs))
		st := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		if hash == "new" {
			st = status
		}
		newest = f.ownedPod(name+"-"+hash+"-x1", l, metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet")), spec, st)
	}
	return newest
}

// failedJob creates the Job name, failed, and its one failed Pod; it returns the Pod's
// name.
func (f *fixture) failedJob(name string) string {
	f.t.Helper()
	spec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "m", Image: "m:1"}}}
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: batchv1.JobSpec{
		BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: spec}}}
	must(f.t, env.Client.Create(f.ctx, j)) // the API server sets the selector (controller-uid)
	now := metav1.Now()
	j.Status = batchv1.JobStatus{StartTime: &now, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
	}}
	must(f.t, env.Client.Status().Update(f.ctx, j))
	podName := name + "-x1"
	f.ownedPod(podName, j.Spec.Selector.MatchLabels, metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job")), spec, corev1.PodStatus{
		Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "m", Image: "m:1",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3}}}}})
	return podName
}

// ownedPod creates the Pod name with labels, its controller owner and status.
func (f *fixture) ownedPod(name string, labels map[string]string, owner *metav1.OwnerReference, spec corev1.PodSpec, status corev1.PodStatus) string {
	f.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{*owner}}, Spec: spec}
	must(f.t, env.Client.Create(f.ctx, p))
	p.Status = status
	must(f.t, env.Client.Status().Update(f.ctx, p))
	return name
}

// TestJudgeEntryFailFast: the pure judgement of an entry with a diagnosis, with and
// without failFast; FailFast never touches the Decider that results share.
func TestJudgeEntryFailFast(t *testing.T) {
	minute := time.Minute
	failing := health.Result{Outcome: health.Fail, Message: "not available", RuleIndex: 0,
		DecidedBy: &health.Decider{Kind: "HealthRuleSet", Namespace: "ns", Name: "rules", Rule: 0, Cause: health.CauseRuleFailed}}
	cases := []struct {
		name      string
		res       health.Result
		diag      string
		terminal  bool
		failFast  bool
		state     v1alpha1.HealthState
		cause     health.Cause
		diagnosis string
	}{
		{"terminal, failFast: Degraded at once", failing, "Pod a: x", true, true, v1alpha1.StateDegraded, health.CauseFailedFast, "Pod a: x"},
		{"terminal, no failFast: Progressing with the diagnosis", failing, "Pod a: x", true, false, v1alpha1.StateProgressing, health.CauseRuleFailed, "Pod a: x"},
		{"not terminal, failFast: Progressing", failing, "Pod a: y", false, true, v1alpha1.StateProgressing, health.CauseRuleFailed, "Pod a: y"},
		{"passing: no diagnosis", health.Result{Outcome: health.Pass, RuleIndex: -1}, "Pod a: x", true, true, v1alpha1.StateHealthy, "", ""},
	}
	for _, c := range cases {
		o := entryObservation{res: c.res}
		o.diagnosis.Message, o.diagnosis.Terminal = c.diag, c.terminal
		r := judgeEntry(&o, &minute, c.failFast, t0, 0)
		cause := health.Cause("")
		if r.decidedBy != nil {
			cause = r.decidedBy.Cause
		}
		if r.state != c.state || cause != c.cause || r.diagnosis != c.diagnosis || (r.state != v1alpha1.StateHealthy && r.message != "not available") {
			t.Errorf("%s: %s %q cause %s diagnosis %q", c.name, r.state, r.message, cause, r.diagnosis)
		}
	}
	// Past the deadline a terminal diagnosis keeps the cause FailedFast (it does not turn
	// DeadlinePassed when the deadline passes); without failFast it is DeadlinePassed.
	longAgo := t0.Add(-2 * minute)
	for failFast, want := range map[bool]health.Cause{true: health.CauseFailedFast, false: health.CauseDeadlinePassed} {
		o := entryObservation{res: failing, prior: prior{firstUnhealthy: &longAgo}}
		o.diagnosis.Message, o.diagnosis.Terminal = "Pod a: x", true
		if r := judgeEntry(&o, &minute, failFast, t0, 0); r.state != v1alpha1.StateDegraded || r.decidedBy == nil || r.decidedBy.Cause != want {
			t.Errorf("past the deadline, failFast %v: %s decided by %+v, want Degraded, cause %s", failFast, r.state, r.decidedBy, want)
		}
	}
	if failing.DecidedBy.Cause != health.CauseRuleFailed {
		t.Error("FailFast modified the result's shared Decider")
	}
}

// TestDiagnosisOfHostileReplicaSet: a tenant's ReplicaSet with a revision the Deployment
// controller never writes ("-1") once made the diagnosis dereference nil inside a read
// goroutine, which no recover covered, and ended the process; now the pass completes
// and the entry is judged from its own object.
func TestDiagnosisOfHostileReplicaSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.workloadRelease()
	l := map[string]string{"app": "boom"}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "boom", Namespace: f.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: l},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: spec}}}
	must(t, env.Client.Create(f.ctx, d))
	must(t, env.Client.Create(f.ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "boom-a", Namespace: f.ns, Labels: l,
		Annotations:     map[string]string{"deployment.kubernetes.io/revision": "-1"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: spec}}}))
	f.inventory(cmEntry{group: "apps", version: "v1", kind: "Deployment", resource: "deployments", name: "boom", renderRef: "r1"})
	f.lastAttempted("r1")
	f.pass()
	if e := f.entry("boom"); e.State != v1alpha1.StateProgressing || e.Message != "not available" || e.Diagnosis != "" {
		t.Errorf("entry %s %q diagnosis %q, want Progressing %q without a diagnosis (its ReplicaSet has no Pod)", e.State, e.Message, e.Diagnosis, "not available")
	}
}

// TestDiagnosisOfACachedObject: with a watch-fed cluster cache, a failing Deployment
// that the pass reads from memory on its own goroutine (not on a goroutine of the read
// bound) is diagnosed as one read with a GET: its entry names the crash-looping Pod.
func TestDiagnosisOfACachedObject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.watching()
	spy := &countingClusters{ClusterCache: f.h.Clusters}
	f.h.Clusters = spy
	f.workloadRelease()
	crash := f.deploymentWithPod("crash", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", Image: "app:1", RestartCount: 5,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
	}}})
	f.inventory(cmEntry{group: "apps", version: "v1", kind: "Deployment", resource: "deployments", name: "crash", renderRef: "r1"})
	f.lastAttempted("r1")
	want := "Pod " + f.ns + "/" + crash + ": container app waiting: CrashLoopBackOff: back-off, 5 restarts"
	// The first pass starts the Deployments' informer; a later one reads from it.
	eventually(t, "a pass that reads the Deployment from the cache", func() bool {
		f.clock.Step(time.Second)
		f.pass()
		return spy.cached.Load() > 0
	})
	if e := f.entry("crash"); e.State != v1alpha1.StateProgressing || e.Diagnosis != want {
		t.Fatalf("crash: %s %q diagnosis %q, want Progressing with diagnosis %q", e.State, e.Message, e.Diagnosis, want)
	}
}
