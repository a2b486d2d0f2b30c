// The causes that Pods, Jobs and ReplicaSets show (FromPods, podCause), and how a
// workload's current Pods are found (selectorOf, ownerOf, newestReplicaSet, ownedPods).

package diagnosis

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
)

// FromPods returns the first cause among pods (in the order given): the first Pod with
// a terminal cause, else the first Pod with any cause; empty when none shows one.
func FromPods(pods []*corev1.Pod) Diagnosis {
	var first Diagnosis
	for _, p := range pods {
		if p == nil {
			continue
		}
		d := podCause(p)
		if d.Terminal {
			return d
		}
		if first.Message == "" {
			first = d
		}
	}
	return first
}

// Terminal's rule, the library's policy for Pods (docs/rule-library.md): a container
// waiting because its image cannot be pulled or named, or because its configuration
// cannot be made, or crash-looping after 3 restarts or more; a Pod that the scheduler
// marked Unschedulable; a Job that failed (Failed=True or FailureTarget=True). A Pod in
// phase Failed is not terminal by itself: its controller replaces it (a Job retries up
// to its backoffLimit and then says Failed itself).
var terminalWaiting = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true,
	"ErrImageNeverPull": true, "CreateContainerConfigError": true,
}

// crashLoopRestarts is the restart count from which CrashLoopBackOff is terminal.
const crashLoopRestarts = 3

// podCause is the first cause that p shows, in this order: a failed phase, a
// scheduling failure, a container (init containers first) waiting for a reason other
// than starting, a container terminated with a failure, a container that restarted
// after a failure, a running container that is not ready.
func podCause(p *corev1.Pod) Diagnosis {
	name := "Pod " + p.Namespace + "/" + p.Name + ": "
	say := func(terminal bool, format string, args ...any) Diagnosis {
		return Diagnosis{Message: Line(name + fmt.Sprintf(format, args...)), Terminal: terminal}
	}
	if p.Status.Phase == corev1.PodFailed {
		if p.Status.Reason == "" {
			for _, c := range p.Status.ContainerStatuses {
				if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
					return say(false, "failed: container %s terminated%s (exit code %d)", c.Name, reasonAndMessage(t.Reason, t.Message), t.ExitCode)
				}
			}
		}
		return say(false, "failed%s", reasonAndMessage(p.Status.Reason, p.Status.Message))
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return say(c.Reason == corev1.PodReasonUnschedulable, "not scheduled%s", reasonAndMessage(c.Reason, c.Message))
		}
	}
	statuses := make([]corev1.ContainerStatus, 0, len(p.Status.InitContainerStatuses)+len(p.Status.ContainerStatuses))
	statuses = append(append(statuses, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, c := range statuses {
		if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			terminal := terminalWaiting[w.Reason] || (w.Reason == "CrashLoopBackOff" && c.RestartCount >= crashLoopRestarts)
			return say(terminal, "container %s waiting%s%s%s", c.Name, reasonAndMessage(w.Reason, w.Message), restarts(c), lastTermination(c))
		}
	}
	for _, c := range statuses {
		if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
			return say(false, "container %s terminated%s (exit code %d)%s", c.Name, reasonAndMessage(t.Reason, t.Message), t.ExitCode, restarts(c))
		}
	}
	for _, c := range statuses {
		if t := c.LastTerminationState.Terminated; t != nil && c.RestartCount > 0 && !c.Ready && (t.ExitCode != 0 || t.Reason == "OOMKilled") {
			return say(false, "container %s%s%s", c.Name, restarts(c), lastTermination(c))
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil && !c.Ready {
			msg := ""
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionTrue {
					msg = reasonAndMessage(cond.Reason, cond.Message)
				}
			}
			return say(false, "container %s is running but not ready%s%s", c.Name, msg, restarts(c))
		}
	}
	return Diagnosis{}
}

// held is the diagnosis of a workload that its owner stopped on purpose, which no Pod
// explains: a Job with spec.suspend (it starts no Pod until resumed) or a Deployment
// with spec.paused (its rollout does not move). Neither is terminal.
func held(w *unstructured.Unstructured, kind string) Diagnosis {
	name := kind + " " + w.GetNamespace() + "/" + w.GetName()
	switch kind {
	case "Job":
		if suspended, _, _ := unstructured.NestedBool(w.Object, "spec", "suspend"); suspended {
			return Diagnosis{Message: Line(name + " is suspended (spec.suspend: true): it runs no Pod until it is resumed")}
		}
	case "Deployment":
		if paused, _, _ := unstructured.NestedBool(w.Object, "spec", "paused"); paused {
			return Diagnosis{Message: Line(name + " is paused (spec.paused: true): its rollout does not progress until it is resumed")}
		}
	}
	return Diagnosis{}
}

// jobFailed tells whether the Job has the condition Failed=True (its backoffLimit or
// activeDeadlineSeconds was reached) or FailureTarget=True (it is being terminated for
// it).
// It returns ": reason: message" of that condition (at least ":"), "" when it has
// neither.
func jobFailed(job *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(job.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if (m["type"] == "Failed" || m["type"] == "FailureTarget") && m["status"] == "True" {
			reason, _ := m["reason"].(string)
			message, _ := m["message"].(string)
			if s := reasonAndMessage(reason, message); s != "" {
				return s
			}
			return ":"
		}
	}
	return ""
}

// replicaFailure is the cause of a ReplicaSet that cannot create its Pods.
func replicaFailure(rs *appsv1.ReplicaSet) Diagnosis {
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			return Diagnosis{Message: Line("ReplicaSet " + rs.Namespace + "/" + rs.Name + ": cannot create Pods" + reasonAndMessage(c.Reason, c.Message))}
		}
	}
	return Diagnosis{}
}

// reasonAndMessage is ": reason: message", leaving out what is empty.
func reasonAndMessage(reason, message string) string {
	s := ""
	if reason != "" {
		s += ": " + reason
	}
	if message != "" {
		s += ": " + message
	}
	return s
}

// restarts is ", N restarts" for a container that restarted.
func restarts(c corev1.ContainerStatus) string {
	if c.RestartCount == 0 {
		return ""
	}
	return fmt.Sprintf(", %d restarts", c.RestartCount)
}

// lastTermination is "; last terminated: Reason (exit code N)" when the container's
// last run ended.
func lastTermination(c corev1.ContainerStatus) string {
	t := c.LastTerminationState.Terminated
	if t == nil {
		return ""
	}
	reason := t.Reason
	if reason == "" {
		reason = "terminated"
	}
	return fmt.Sprintf("; last terminated: %s (exit code %d)", reason, t.ExitCode)
}

// Line makes s a diagnosis line: every control character (C0, DEL, C1) and Unicode
// bidirectional formatting character becomes a space (a Pod's message is a tenant's
// text, and kubectl prints it raw), runs of white space become one space, and it is cut
// to MaxMessage characters.
func Line(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > MaxMessage {
		s = string(r[:MaxMessage-1]) + "…"
	}
	return s
}

// selectorOf is the workload's spec.selector as a label selector; false when it has
// none, it does not parse, or it does not restrict (restricts).
func selectorOf(w *unstructured.Unstructured) (labels.Selector, bool) {
	m, found, err := unstructured.NestedMap(w.Object, "spec", "selector")
	if err != nil || !found {
		return nil, false
	}
	var ls metav1.LabelSelector
	if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls) != nil {
		return nil, false
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || !restricts(sel) {
		return nil, false
	}
	return sel, true
}

// restricts reports whether sel has a requirement that a Pod meets only by carrying a
// label (=, ==, in, exists): NotIn, != and DoesNotExist alone match every Pod without
// the label, hence every Pod of a namespace.
func restricts(sel labels.Selector) bool {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In, selection.Exists:
			return true
		}
	}
	return false
}

// withLabel adds the requirement key=value to sel.
func withLabel(sel labels.Selector, key, value string) labels.Selector {
	r, err := labels.NewRequirement(key, selection.Equals, []string{value})
	if err != nil {
		return sel
	}
	return sel.Add(*r)
}

// owner names a controller: by UID, or by kind and name when the object has no UID (an
// object of a file given to convoyctl health eval).
type owner struct {
	uid        types.UID
	kind, name string
}

func ownerOf(o metav1.Object, kind string) owner {
	return owner{uid: o.GetUID(), kind: kind, name: o.GetName()}
}

// controlledBy reports whether o's controller owner reference names ow.
func controlledBy(o metav1.Object, ow owner) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	switch {
	case ref == nil:
		return false
	case ow.uid != "":
		return ref.UID == ow.uid
	default:
		return ref.UID == "" && ref.Kind == ow.kind && ref.Name == ow.name && ow.name != ""
	}
}

// newestReplicaSet is the ReplicaSet of objs that owner controls with the highest
// deployment.kubernetes.io/revision (by name on a tie); nil when owner controls none.
func newestReplicaSet(objs []unstructured.Unstructured, ow owner) *appsv1.ReplicaSet {
	var newest *appsv1.ReplicaSet
	var newestRev int64
	for i := range objs {
		var rs appsv1.ReplicaSet
		if runtime.DefaultUnstructuredConverter.FromUnstructured(objs[i].Object, &rs) != nil || !controlledBy(&rs, ow) {
			continue
		}
		rev, err := strconv.ParseInt(rs.Annotations["deployment.kubernetes.io/revision"], 10, 64)
		if err != nil || rev < 0 {
			rev = 0 // the Deployment controller writes 1 and up: anything else counts as none
		}
		if newest == nil || rev > newestRev || (rev == newestRev && rs.Name > newest.Name) {
			newest, newestRev = &rs, rev
		}
	}
	return newest
}

// ownedPods are the Pods of objs that owner controls (of revision, when it is not ""),
// sorted by name; objects that are not Pods are left out.
func ownedPods(objs []unstructured.Unstructured, ow owner, revision string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range objs {
		p := &corev1.Pod{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(objs[i].Object, p) != nil || !controlledBy(p, ow) {
			continue
		}
		if revision != "" && p.Labels[appsv1.ControllerRevisionHashLabelKey] != revision {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
