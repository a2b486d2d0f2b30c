package health_test

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"os"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/manifest"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// defaultsCase is the expected assessment of one object file by convoy-defaults, with
// no deadline and no earlier anchor. Every expectation below was worked out by hand from
// the rules in spec/health-rule-sets.txt, CONTRACT §2 and CEL's semantics; the comment
// beside a case gives the reasoning. "Argo" notes where Argo CD's built-in check (the
// fixture's origin, pkg/health/health_test.go of gitops-engine) says otherwise: the spec
// wins there.
type defaultsCase struct {
	state   v1alpha1.HealthState
	message string
}

// decodeErrors are the fixtures that strict decoding rejects, with the error. The
// gitops-engine file writes spec.updateStrategy twice (lines 30 and 94): a key written
// twice is an error (a live object never has one).
var decodeErrors = map[string]string{
	"statefulset-ondelete.yaml": `duplicate key "updateStrategy" at spec.updateStrategy (line 94; first at line 30)`,
}

// Shorthands for the table.
const (
	healthy     = v1alpha1.StateHealthy
	progressing = v1alpha1.StateProgressing
	unknown     = v1alpha1.StateUnknown
)

// gitopsEngineCases covers every file of testdata/gitops-engine-health.
var gitopsEngineCases = map[string]defaultsCase{
	// No default rule for apiregistration.k8s.io APIServices: passes. Argo: the *-false
	// files are Progressing.
	"apiservice-v1-false.yaml":      {healthy, ""},
	"apiservice-v1-true.yaml":       {healthy, ""},
	"apiservice-v1beta1-false.yaml": {healthy, ""},
	"apiservice-v1beta1-true.yaml":  {healthy, ""},
	// No rule for argoproj.io Applications: passes (Argo has no health for them either).
	"application-degraded.yaml": {healthy, ""},
	"application-healthy.yaml":  {healthy, ""},
	// metadata has no generation, so `observedGeneration == metadata.generation` errors
	// (no such key), but updatedNumberScheduled is absent, so has() is false and the
	// false operand absorbs the error: Fail. Message: numberReady 1, desired 1, updated
	// absent → '0'. Argo: Healthy (it accepts OnDelete DaemonSets); spec wins.
	"daemonset-ondelete.yaml": {progressing, "1/1 ready, 0 updated"},
	// generation 4 = observedGeneration 4, spec.replicas 1, updatedReplicas 1, but
	// status.replicas 2 ≠ updatedReplicas 1 (an old pod remains): Fail. Message:
	// available 1 / spec 1, updated 1. Argo: Degraded (ProgressDeadlineExceeded); the
	// rules ignore conditions, and without a deadline a failure stays Progressing.
	"deployment-degraded.yaml": {progressing, "1/1 available, 1 updated"},
	// Same status as above: Fail, Progressing (Argo agrees).
	"deployment-progressing.yaml": {progressing, "1/1 available, 1 updated"},
	// Same status, paused: the rules ignore spec.paused. Argo: Suspended (no such state).
	"deployment-suspended.yaml": {progressing, "1/1 available, 1 updated"},
	// No rule for autoscaling HPAs: passes. Argo: hpa-*-degraded Degraded,
	// hpa-*-progressing* Progressing.
	"hpa-v1-degraded.yaml":                        {healthy, ""},
	"hpa-v1-healthy-toofew.yaml":                  {healthy, ""},
	"hpa-v1-healthy.yaml":                         {healthy, ""},
	"hpa-v1-progressing-with-no-annotations.yaml": {healthy, ""},
	"hpa-v1-progressing.yaml":                     {healthy, ""},
	"hpa-v2-degraded.yaml":                        {healthy, ""},
	"hpa-v2-healthy.yaml":                         {healthy, ""},
	"hpa-v2-progressing.yaml":                     {healthy, ""},
	"hpa-v2beta1-healthy-disabled.yaml":           {healthy, ""},
	"hpa-v2beta1-healthy.yaml":                    {healthy, ""},
	"hpa-v2beta2-healthy.yaml":                    {healthy, ""},
	// No rule for networking.k8s.io Ingresses: passes. Argo: ingress-unassigned
	// Progressing.
	"ingress-nonemptylist.yaml": {healthy, ""},
	"ingress-unassigned.yaml":   {healthy, ""},
	"ingress.yaml":              {healthy, ""},
	// Only a Failed=True condition, no Complete=True: Fail with the jobs rule's fixed
	// message. Argo: Degraded; here Progressing until a deadline passes.
	"job-failed.yaml": {progressing, "job not complete"},
	// No conditions at all: has(conditions) is false: Fail.
	"job-running.yaml": {progressing, "job not complete"},
	// Complete=True: Pass.
	"job-succeeded.yaml": {healthy, ""},
	// Only Suspended=True: Fail. Argo: Suspended (no such state).
	"job-suspended.yaml": {progressing, "job not complete"},
	// kind Service of serving.knative.dev/v1alpha1: no rule (the pods rule is for v1
	// pods only): passes.
	"knative-service.yaml": {healthy, ""},
	// phase Running: the pods rule looks at the phase only: Pass. Argo: Degraded
	// (CrashLoopBackOff).
	"pod-crashloop.yaml": {healthy, ""},
	// Being deleted, phase Pending: Fail (Argo: Progressing).
	"pod-deletion.yaml": {progressing, "phase: Pending"},
	// phase Running: Pass. Argo: Degraded (container error).
	"pod-error.yaml": {healthy, ""},
	// phase Failed: Fail. Argo: Degraded; here Progressing until a deadline passes.
	"pod-failed.yaml": {progressing, "phase: Failed"},
	// phase Pending: Fail. Argo: Degraded (ImagePullBackOff).
	"pod-imagepullbackoff.yaml": {progressing, "phase: Pending"},
	// phase Pending: Fail (Argo: Progressing).
	"pod-pending.yaml": {progressing, "phase: Pending"},
	// phase Running, not ready: Pass. Argo: Progressing.
	"pod-running-not-ready.yaml": {healthy, ""},
	// phase Running: Pass (Argo: Healthy).
	"pod-running-restart-always.yaml": {healthy, ""},
	// phase Running: Pass. Argo: Progressing (restartPolicy Never runs to completion).
	"pod-running-restart-never.yaml": {healthy, ""},
	// phase Running: Pass. Argo: Progressing.
	"pod-running-restart-onfailure.yaml": {healthy, ""},
	// phase Succeeded: Pass.
	"pod-succeeded.yaml": {healthy, ""},
	// phase Bound: Pass.
	"pvc-bound.yaml": {healthy, ""},
	// phase Pending: Fail (Argo: Progressing).
	"pvc-pending.yaml": {progressing, "phase: Pending"},
	// generation 1 = observedGeneration 1, spec.replicas 1, readyReplicas 1, but no
	// updatedReplicas (older cluster, see case 2): has() false: Fail. Argo: Healthy.
	"statefulset-ondelete.yaml": {}, // decodeErrors
	"statefulset.yaml":          {progressing, "1/1 ready, 0 updated"},
	// No rule for v1 services: passes. Argo: svc-loadbalancer-unassigned Progressing.
	"svc-clusterip.yaml":                 {healthy, ""},
	"svc-loadbalancer-nonemptylist.yaml": {healthy, ""},
	"svc-loadbalancer-unassigned.yaml":   {healthy, ""},
	"svc-loadbalancer.yaml":              {healthy, ""},
}

// objectCases covers every file of testdata/objects.
var objectCases = map[string]defaultsCase{
	// 1a: generation 2 = observedGeneration 2, ready 3 = spec 3, updatedReplicas absent
	// (0, omitempty): Fail. OnDelete waits for someone to delete the pods.
	"01a-sts-ondelete-template-change.yaml": {progressing, "3/3 ready, 0 updated"},
	// 1b: ready 3 and updated 3 = spec 3: Pass; currentRevision is not looked at.
	"01b-sts-ondelete-template-change.yaml": {healthy, ""},
	// 2: fully ready, but the rule requires updatedReplicas, which this older status
	// leaves out: Fail, and it would turn Degraded at a deadline. The spec's rule wins.
	"02-sts-missing-updatedreplicas.yaml": {progressing, "1/1 ready, 0 updated"},
	// 3a: partition 1, updatedReplicas absent: Fail.
	"03a-sts-partition.yaml": {progressing, "3/3 ready, 0 updated"},
	// 3b: updated 2 ≠ spec 3 (the partition holds ordinal 0 back): Fail. A partitioned
	// rollout never passes the default rule until the partition is lowered.
	"03b-sts-partition.yaml": {progressing, "3/3 ready, 2 updated"},
	// 3c: generation 5 = observedGeneration 5, ready 3 and updated 3 = spec 3: Pass.
	"03c-sts-partition.yaml": {healthy, ""},
	// 4a: no observedGeneration: `status.observedGeneration == ...` errors; numberReady 0
	// = desired 0 is true, but has(updatedNumberScheduled) is false, and that false
	// absorbs the error: Fail. Message: '0' / '0' ready, '0' updated.
	"04a-ds-just-created.yaml": {progressing, "0/0 ready, 0 updated"},
	// 4b: no observedGeneration, every other operand is true: nothing absorbs the error,
	// so the rule errors: Unknown with CEL's message. (The DaemonSet rule, unlike the
	// others, has no has(object.status.observedGeneration) guard.)
	"04b-ds-just-created.yaml": {unknown, "evaluation error: no such key: observedGeneration"},
	// 4c: as 4b but numberReady 1 ≠ desired 2: that false absorbs the error: Fail.
	"04c-ds-just-created.yaml": {progressing, "1/2 ready, 2 updated"},
	// 6-control: generation 5 = observedGeneration 5, updated 32 = spec 32, replicas 32 =
	// updated, available 32 = updated: Pass (paused does not matter).
	"06-control-deploy-paused-template-changed.yaml": {healthy, ""},
	// 6: paused with a new template: updatedReplicas absent: Fail.
	"06-deploy-paused-template-changed.yaml": {progressing, "32/32 available, 0 updated"},
	// 7a: observedGeneration 1 = generation 1 and spec.replicas == 0: Pass.
	"07a-deploy-no-progress-deadline-condition.yaml": {healthy, ""},
	// 7b: updated 1 = spec 1, replicas 1 = updated, availableReplicas absent: Fail. It
	// turns Degraded at the Release's deadline, whatever the Progressing condition says.
	"07b-deploy-no-progress-deadline-condition.yaml": {progressing, "0/1 available, 1 updated"},
	// 8: updated 1 = replicas 1 = available 1 = spec 1: Pass; terminatingReplicas is not
	// looked at (as kubectl rollout status).
	"08-deploy-old-pod-still-terminating.yaml": {healthy, ""},
	// 11a: phase Running: Pass, crash loop or not (the pods rule reads the phase only).
	"11a-pod-phase-only.yaml": {healthy, ""},
	// 11b: phase Succeeded: Pass.
	"11b-pod-phase-only.yaml": {healthy, ""},
	// 12: phase Pending: Fail; an unconsumed WaitForFirstConsumer claim turns Degraded at
	// the deadline.
	"12-pvc-wait-for-first-consumer.yaml": {progressing, "phase: Pending"},
	// 13: no conditions: Fail.
	"13-job-running-with-failing-pods.yaml": {progressing, "job not complete"},
	// 15a: only SuccessCriteriaMet=True: no Complete=True: Fail.
	"15a-job-successcriteriamet-before-complete.yaml": {progressing, "job not complete"},
	// 15b: Complete=True: Pass.
	"15b-job-successcriteriamet-before-complete.yaml": {healthy, ""},
	// 15c: Complete with status "False": the exists() needs status 'True': Fail.
	"15c-job-successcriteriamet-before-complete.yaml": {progressing, "job not complete"},
	// 16a: no rule for helm.toolkit.fluxcd.io HelmReleases: passes, status or not.
	"16a-no-rule-object-without-status.yaml": {healthy, ""},
	// 16b: no rule for batch/v1 cronjobs (only jobs): passes.
	"16b-no-rule-object-without-status.yaml": {healthy, ""},
	// 18a: generation 3 = observedGeneration 3, updated 3 = spec 3, replicas 3, available
	// 3: Pass. TestCase18aIntVsDouble decodes it both ways.
	"18a-cel-int-vs-double.yaml": {healthy, ""},
}

// defaultsRuleIndex is the index of each kind's rule in convoy-defaults.
var defaultsRuleIndex = map[string]int{
	"Deployment": 0, "StatefulSet": 1, "DaemonSet": 2, "Pod": 3, "Job": 4,
	"PersistentVolumeClaim": 5, "PersistentVolume": 6,
}

func TestDefaultsGitopsEngineFixtures(t *testing.T) {
	t.Parallel()
	runDefaultsCases(t, testdataPath(t, "gitops-engine-health"), gitopsEngineCases)
}

func TestDefaultsObjectCases(t *testing.T) {
	t.Parallel()
	runDefaultsCases(t, testdataPath(t, "objects"), objectCases)
}

// runDefaultsCases evaluates every file of dir and checks that the table covers
// exactly the files that are there.
func runDefaultsCases(t *testing.T, dir string, cases map[string]defaultsCase) {
	t.Helper()
	ev := defaultsEvaluator(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTICE, LICENSE
		}
		seen[name] = true
		want, ok := cases[name]
		if !ok {
			t.Errorf("%s: no expected result in the table", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if derr := decodeErrors[name]; derr != "" {
				f, err := os.Open(dir + "/" + name)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := manifest.DecodeObjects(f); err == nil || !strings.Contains(err.Error(), derr) {
					t.Errorf("decoding: got %v, want an error containing %q", err, derr)
				}
				return
			}
			r := evaluate(ev, manifesttest.Object(t, dir+"/"+name))
			now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			state, _ := health.DeriveState(r, nil, nil, now)
			if state != want.state || r.Message != want.message {
				t.Errorf("got %s %q (%v, rule set %q, rule %d), want %s %q",
					state, r.Message, r.Outcome, r.RuleSet, r.RuleIndex, want.state, want.message)
			}
			// The deciding rule is the one for the object's kind; a pass names none.
			wantSet, wantIndex := "", -1
			if r.Outcome != health.Pass {
				wantSet, wantIndex = "GlobalHealthRuleSet/convoy-defaults", defaultsRuleIndex[manifesttest.Object(t, dir+"/"+name).GetKind()]
			}
			if r.RuleSet != wantSet || r.RuleIndex != wantIndex {
				t.Errorf("deciding rule: got %q %d, want %q %d", r.RuleSet, r.RuleIndex, wantSet, wantIndex)
			}
			// With a deadline that has passed since the anchor, only failures change.
			deadline, anchor := 5*time.Minute, now.Add(-time.Hour)
			late, _ := health.DeriveState(r, &anchor, &deadline, now)
			wantLate := want.state
			if want.state == progressing {
				wantLate = v1alpha1.StateDegraded
			}
			if late != wantLate {
				t.Errorf("after the deadline: got %s, want %s", late, wantLate)
			}
		})
	}
	for name := range cases {
		if !seen[name] {
			t.Errorf("%s: in the table but not in %s", name, dir)
		}
	}
}

// TestDefaultsPersistentVolume: convoy-defaults' PersistentVolume rule passes a volume
// that is Bound or Available and fails any other phase, or none, with its phase.
func TestDefaultsPersistentVolume(t *testing.T) {
	t.Parallel()
	ev := defaultsEvaluator(t)
	pv := func(status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolume",
			"metadata": map[string]any{"name": "pv1"}, "spec": map[string]any{}}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	for _, c := range []struct {
		status  map[string]any
		outcome health.Outcome
		message string
	}{
		{map[string]any{"phase": "Bound"}, health.Pass, ""},
		{map[string]any{"phase": "Available"}, health.Pass, ""},
		{map[string]any{"phase": "Released"}, health.Fail, "phase: Released"},
		{map[string]any{"phase": "Failed"}, health.Fail, "phase: Failed"},
		{map[string]any{"phase": "Pending"}, health.Fail, "phase: Pending"},
		// Its messageExpression's has(object.status.phase) errors without a status, so
		// the general message names the rule.
		{nil, health.Fail, "health rule 6 of GlobalHealthRuleSet/convoy-defaults not satisfied"},
	} {
		r := evaluate(ev, pv(c.status))
		if r.Outcome != c.outcome || r.Message != c.message {
			t.Errorf("status %v: got %v %q, want %v %q", c.status, r.Outcome, r.Message, c.outcome, c.message)
		}
		if c.outcome == health.Fail && r.RuleIndex != defaultsRuleIndex["PersistentVolume"] {
			t.Errorf("status %v: decided by rule %d, want the PersistentVolume rule", c.status, r.RuleIndex)
		}
	}
}
