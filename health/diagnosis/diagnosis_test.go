package diagnosis

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// obj parses one YAML object.
func obj(t *testing.T, y string) unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return unstructured.Unstructured{Object: m}
}

// lister answers from objs as a target would: by resource, namespace and labels.
func lister(objs []unstructured.Unstructured, calls *[]string) ListFunc {
	return func(_ context.Context, gvr schema.GroupVersionResource, ns string, sel labels.Selector) ([]unstructured.Unstructured, error) {
		*calls = append(*calls, gvr.Resource+" "+sel.String())
		var out []unstructured.Unstructured
		for _, o := range objs {
			kind := map[string]string{"pods": "Pod", "replicasets": "ReplicaSet"}[gvr.Resource]
			if o.GetKind() == kind && o.GetNamespace() == ns && sel.Matches(labels.Set(o.GetLabels())) {
				out = append(out, o)
			}
		}
		return out, nil
	}
}

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo, uid: d1}
spec: {selector: {matchLabels: {app: web}}}
`

// rs is a ReplicaSet of the Deployment web at revision rev with template hash hash.
func rs(name, uid, rev, hash, extra string) string {
	return `
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: ` + name + `
  namespace: demo
  uid: ` + uid + `
  labels: {app: web, pod-template-hash: "` + hash + `"}
  annotations: {deployment.kubernetes.io/revision: "` + rev + `"}
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: d1, controller: true}]
` + extra
}

// pod is a Pod controlled by the ReplicaSet ownerUID, with template hash hash and status.
func pod(name, ownerUID, hash, status string) string {
	return `
apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: demo
  labels: {app: web, pod-template-hash: "` + hash + `"}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: x, uid: ` + ownerUID + `, controller: true}]
status:
` + status
}

func TestDiagnoseDeployment(t *testing.T) {
	old := rs("web-old", "r1", "1", "aaa", "")
	newRS := rs("web-new", "r2", "2", "bbb", "")
	crash := `
  phase: Running
  containerStatuses:
  - name: app
    ready: false
    restartCount: 4
    state: {waiting: {reason: CrashLoopBackOff, message: back-off 40s restarting failed container}}
    lastState: {terminated: {reason: Error, exitCode: 1}}
`
	cases := []struct {
		name     string
		objs     []string
		want     string
		terminal bool
	}{{
		name: "the newest ReplicaSet's crash-looping Pod, not the old one's",
		objs: []string{old, newRS, pod("web-old-1", "r1", "aaa", "  phase: Failed\n  reason: Evicted\n"), pod("web-new-1", "r2", "bbb", crash)},
		want: "Pod demo/web-new-1: container app waiting: CrashLoopBackOff: back-off 40s restarting failed container, 4 restarts; last terminated: Error (exit code 1)", terminal: true,
	}, {
		name: "unschedulable",
		objs: []string{newRS, pod("web-new-1", "r2", "bbb", `
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable, message: "0/2 nodes are available:
      2 node(s) didn't match Pod's node affinity/selector."}]
`)},
		want: "Pod demo/web-new-1: not scheduled: Unschedulable: 0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.", terminal: true,
	}, {
		name: "a terminal Pod comes before an earlier one that is only not ready",
		objs: []string{newRS, pod("web-new-a", "r2", "bbb", `
  phase: Running
  conditions: [{type: Ready, status: "False", reason: ContainersNotReady, message: "containers with unready status: [app]"}]
  containerStatuses: [{name: app, ready: false, restartCount: 0, state: {running: {}}}]
`), pod("web-new-b", "r2", "bbb", `
  phase: Pending
  containerStatuses: [{name: app, ready: false, restartCount: 0, state: {waiting: {reason: ImagePullBackOff, message: "Back-off pulling image \"nope:1\""}}}]
`)},
		want: `Pod demo/web-new-b: container app waiting: ImagePullBackOff: Back-off pulling image "nope:1"`, terminal: true,
	}, {
		name: "only not ready",
		objs: []string{newRS, pod("web-new-a", "r2", "bbb", `
  phase: Running
  conditions: [{type: Ready, status: "False", reason: ContainersNotReady, message: "containers with unready status: [app]"}]
  containerStatuses: [{name: app, ready: false, restartCount: 0, state: {running: {}}}]
`)},
		want: "Pod demo/web-new-a: container app is running but not ready: ContainersNotReady: containers with unready status: [app]",
	}, {
		name: "OOMKilled and restarted, running again but not ready",
		objs: []string{newRS, pod("web-new-a", "r2", "bbb", `
  phase: Running
  containerStatuses: [{name: app, ready: false, restartCount: 2, state: {running: {}}, lastState: {terminated: {reason: OOMKilled, exitCode: 137}}}]
`)},
		want: "Pod demo/web-new-a: container app, 2 restarts; last terminated: OOMKilled (exit code 137)",
	}, {
		name: "a crash loop of two restarts may still recover",
		objs: []string{newRS, pod("web-new-a", "r2", "bbb", `
  phase: Running
  containerStatuses: [{name: app, ready: false, restartCount: 2, state: {waiting: {reason: CrashLoopBackOff}}}]
`)},
		want: "Pod demo/web-new-a: container app waiting: CrashLoopBackOff, 2 restarts",
	}, {
		name: "the newest ReplicaSet cannot create Pods",
		objs: []string{old, rs("web-new", "r2", "2", "bbb", `status:
  conditions: [{type: ReplicaFailure, status: "True", reason: FailedCreate, message: 'pods "web-new-x" is forbidden: exceeded quota'}]
`)},
		want: `ReplicaSet demo/web-new: cannot create Pods: FailedCreate: pods "web-new-x" is forbidden: exceeded quota`,
	}, {
		name: "healthy Pods: no diagnosis",
		objs: []string{newRS, pod("web-new-a", "r2", "bbb", "  phase: Running\n  containerStatuses: [{name: app, ready: true, restartCount: 0, state: {running: {}}}]\n")},
	}, {
		name: "a ReplicaSet that another Deployment controls is not this one's",
		objs: []string{strings.Replace(rs("web-new", "r2", "9", "bbb", ""), "uid: d1", "uid: other", 1), old, pod("web-old-1", "r1", "aaa", crash)},
		want: "Pod demo/web-old-1: container app waiting: CrashLoopBackOff: back-off 40s restarting failed container, 4 restarts; last terminated: Error (exit code 1)", terminal: true,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var objs []unstructured.Unstructured
			for _, y := range c.objs {
				objs = append(objs, obj(t, y))
			}
			w := obj(t, deployment)
			var calls []string
			d, err := Diagnose(context.Background(), &w, lister(objs, &calls))
			if err != nil {
				t.Fatal(err)
			}
			if d.Message != c.want || d.Terminal != c.terminal {
				t.Errorf("got %q terminal %v\nwant %q terminal %v", d.Message, d.Terminal, c.want, c.terminal)
			}
			if len(calls) == 0 || !strings.HasPrefix(calls[0], "replicasets app=web") {
				t.Errorf("reads %v: want the ReplicaSets of the Deployment's selector first", calls)
			}
		})
	}
}

func TestDiagnoseOtherWorkloads(t *testing.T) {
	sts := obj(t, `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: demo, uid: s1}
spec: {selector: {matchLabels: {app: db}}}
status: {updateRevision: db-2}
`)
	stsPod := func(name, rev string) unstructured.Unstructured {
		return obj(t, `
apiVersion: v1
kind: Pod
metadata:
  name: `+name+`
  namespace: demo
  labels: {app: db, controller-revision-hash: `+rev+`}
  ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: db, uid: s1, controller: true}]
status:
  containerStatuses: [{name: db, ready: false, restartCount: 0, state: {waiting: {reason: CreateContainerConfigError, message: 'secret "pw" not found'}}}]
`)
	}
	var calls []string
	d, _ := Diagnose(context.Background(), &sts, lister([]unstructured.Unstructured{stsPod("db-0", "db-1"), stsPod("db-1", "db-2")}, &calls))
	if want := `Pod demo/db-1: container db waiting: CreateContainerConfigError: secret "pw" not found`; d.Message != want || !d.Terminal {
		t.Errorf("StatefulSet: got %q %v, want the Pod of the update revision: %q", d.Message, d.Terminal, want)
	}

	// A Job from a file (no UIDs): its Pod by the owner's kind and name; a failed Pod is
	// not terminal (the Job retries it).
	job := obj(t, `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: demo}
spec: {selector: {matchLabels: {job-name: migrate}}}
`)
	jobPod := obj(t, `
apiVersion: v1
kind: Pod
metadata:
  name: migrate-x
  namespace: demo
  labels: {job-name: migrate}
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: migrate, controller: true}]
status:
  phase: Failed
  containerStatuses: [{name: m, state: {terminated: {reason: Error, exitCode: 3}}}]
`)
	d, _ = Diagnose(context.Background(), &job, lister([]unstructured.Unstructured{jobPod}, &calls))
	want := "Pod demo/migrate-x: failed: container m terminated: Error (exit code 3)"
	if d.Message != want || d.Terminal {
		t.Errorf("running Job: got %q %v, want %q not terminal", d.Message, d.Terminal, want)
	}
	// Once the Job itself failed, its Pods are final.
	job.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}}}
	if d, _ = Diagnose(context.Background(), &job, lister([]unstructured.Unstructured{jobPod}, &calls)); d.Message != want || !d.Terminal {
		t.Errorf("failed Job: got %q %v, want %q terminal", d.Message, d.Terminal, want)
	}

	// Held on purpose: said, nothing listed, not terminal.
	for _, c := range []struct{ y, want string }{
		{"apiVersion: batch/v1\nkind: Job\nmetadata: {name: nightly, namespace: demo}\nspec: {suspend: true, selector: {matchLabels: {a: b}}}\n",
			"Job demo/nightly is suspended (spec.suspend: true): it runs no Pod until it is resumed"},
		{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: demo}\nspec: {paused: true, selector: {matchLabels: {a: b}}}\n",
			"Deployment demo/web is paused (spec.paused: true): its rollout does not progress until it is resumed"},
	} {
		calls = nil
		w := obj(t, c.y)
		if d, err := Diagnose(context.Background(), &w, lister(nil, &calls)); d.Message != c.want || d.Terminal || err != nil || len(calls) != 0 {
			t.Errorf("got %+v %v after reads %v, want %q and nothing read", d, err, calls, c.want)
		}
	}

	// No selector, or one that selects everything: nothing is listed.
	for _, y := range []string{
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: a, namespace: demo}\nspec: {}\n",
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: a, namespace: demo}\nspec: {selector: {}}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: demo}\nspec: {selector: {app: a}}\n",
	} {
		calls = nil
		w := obj(t, y)
		if d, err := Diagnose(context.Background(), &w, lister(nil, &calls)); d != (Diagnosis{}) || err != nil || len(calls) != 0 {
			t.Errorf("%s: got %+v %v after reads %v, want nothing read", y, d, err, calls)
		}
	}

	// A list error is returned.
	boom := errors.New("boom")
	w := obj(t, deployment)
	if _, err := Diagnose(context.Background(), &w, func(context.Context, schema.GroupVersionResource, string, labels.Selector) ([]unstructured.Unstructured, error) {
		return nil, boom
	}); !errors.Is(err, boom) {
		t.Errorf("got %v, want the list's error", err)
	}
}

// TestLine: a diagnosis is one line of at most MaxMessage characters, and no character
// of a tenant's text (a Pod's message) can drive a terminal: control characters (C0,
// DEL, C1) and bidirectional formatting characters become spaces.
func TestLine(t *testing.T) {
	long := strings.Repeat("é", 2000)
	if got := Line("a\n\tb  " + long); len([]rune(got)) != MaxMessage || !strings.HasPrefix(got, "a b é") || strings.ContainsAny(got, "\n\t") {
		t.Errorf("got %d runes %q…", len([]rune(got)), got[:10])
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "demo"}}
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "ok\x1b[2J\x1b]0;pwned\x07\x00\u009b31m\u202eevil\x7f\u2066x"
	d := FromPods([]*corev1.Pod{nil, p})
	if want := "Pod demo/p: failed: Evicted: ok [2J ]0;pwned 31m evil x"; d.Message != want {
		t.Errorf("got %q, want %q", d.Message, want)
	}
	p.Status.Message = strings.Repeat("\U0001F600", 100000)
	if n := len([]rune(FromPods([]*corev1.Pod{p}).Message)); n != MaxMessage {
		t.Errorf("a huge message gives %d characters, want %d", n, MaxMessage)
	}
}

// TestDiagnoseHostileObjects: what a tenant can write into its own objects never panics,
// never lists every Pod of a namespace, and a terminal diagnosis always says why.
func TestDiagnoseHostileObjects(t *testing.T) {
	// A ReplicaSet the Deployment controls with a negative, huge or non-numeric revision
	// (counted as 0; the first such one is taken).
	for _, rev := range []string{"-1", "-9223372036854775808", "99999999999999999999", "x"} {
		w := obj(t, deployment)
		var calls []string
		d, err := Diagnose(context.Background(), &w, lister([]unstructured.Unstructured{obj(t, rs("web-x", "r9", rev, "zzz", "")),
			obj(t, pod("web-x-1", "r9", "zzz", "  phase: Pending\n  conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]\n"))}, &calls))
		if err != nil || d.Message != "Pod demo/web-x-1: not scheduled: Unschedulable" {
			t.Errorf("revision %q: got %+v %v", rev, d, err)
		}
	}
	// Selectors that match every Pod without a label: nothing is listed.
	for _, sel := range []string{
		`{matchExpressions: [{key: nope, operator: DoesNotExist}]}`,
		`{matchExpressions: [{key: nope, operator: NotIn, values: [x]}]}`,
	} {
		w := obj(t, "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds, namespace: demo, uid: u1}\nspec: {selector: "+sel+"}\n")
		var calls []string
		if d, _ := Diagnose(context.Background(), &w, lister(nil, &calls)); len(calls) > 0 || d != (Diagnosis{}) {
			t.Errorf("selector %s: listed %q, got %+v", sel, calls, d)
		}
	}
	// A failed Job without any Pod: terminal, and the Job's condition says why.
	j := obj(t, "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: demo, uid: j1}\nspec: {selector: {matchLabels: {a: b}}}\n"+
		"status: {conditions: [{type: Failed, status: \"True\", reason: DeadlineExceeded, message: Job was active longer than specified deadline}]}\n")
	var calls []string
	if d, _ := Diagnose(context.Background(), &j, lister(nil, &calls)); !d.Terminal || d.Message != "Job demo/j failed: DeadlineExceeded: Job was active longer than specified deadline" {
		t.Errorf("failed Job without Pods: got %+v", d)
	}
}
