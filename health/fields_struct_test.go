package health

import (
	"fmt"
	"math/rand"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/meta"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// TestMarshalKeptIsWhatPruneKeeps: of random objects of built-in types, MarshalKept
// encodes exactly what Prune keeps of the object's JSON: the cache keeps the same of an
// object watched in protobuf and of one watched in JSON. With the fields of every
// shipped rule set, and with fields that reach into lists, maps, embedded structs and
// values that encode themselves.
func TestMarshalKeptIsWhatPruneKeeps(t *testing.T) {
	rf := FieldsOf(shippedRuleSets(t), nil)
	extra := []*Fields{
		nil,
		fieldsOfPaths("spec"),
		fieldsOfPaths("metadata.labels.app", "metadata.creationTimestamp", "spec.template.spec.containers.image",
			"spec.strategy.rollingUpdate.maxSurge", "spec.ports.targetPort", "status.conditions.type",
			"spec.resources.requests", "status.capacity.storage", "spec.rules.http.paths.backend", "data.k"),
		fieldsOfPaths("kind", "spec.template.metadata.labels", "spec.jobTemplate.spec.template.spec.initContainers.name",
			"status.loadBalancer.ingress.ip", "spec.minAvailable", "spec.metrics.resource.target.averageUtilization"),
	}
	fill := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(7), serializer.NewCodecFactory(clientgoscheme.Scheme)).NilChance(0.2).NumElements(0, 2)
	for _, example := range []runtime.Object{
		&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &appsv1.ReplicaSet{},
		&batchv1.Job{}, &batchv1.CronJob{}, &corev1.Pod{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{},
		&corev1.ConfigMap{}, &networkingv1.Ingress{}, &policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{},
	} {
		gvks, _, err := clientgoscheme.Scheme.ObjectKinds(example)
		if err != nil {
			t.Fatal(err)
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvks[0])
		all := append([]*Fields{rf.For(gvks[0].GroupVersion().String(), plural.Resource)}, extra...)
		for i := range 40 {
			obj := example.DeepCopyObject()
			fill.Fill(obj)
			for _, fields := range all {
				if !compareKept(t, fmt.Sprintf("%s #%d", gvks[0].Kind, i), fields, obj) {
					t.FailNow()
				}
			}
		}
	}
}

// TestMarshalKeptLeavesOutWhatIsNotKept: the fields that are not kept are not in the
// JSON, not even as the empty structs that encoding/json writes of a Go object, and the
// object is not changed.
func TestMarshalKeptLeavesOutWhatIsNotKept(t *testing.T) {
	d := &appsv1.Deployment{}
	d.Name = "web"
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "img"}}
	d.Spec.MinReadySeconds = 5
	d.Status.ReadyReplicas = 2
	raw, err := fieldsOfPaths("metadata.name", "status", "spec.template.spec.containers.image").MarshalKept(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"name":"web"},"spec":{"template":{"spec":{"containers":[{"image":"img"}]}}},"status":{"readyReplicas":2}}`
	if string(raw) != want {
		t.Fatalf("MarshalKept = %s, want %s", raw, want)
	}
	if d.Spec.MinReadySeconds != 5 || d.Spec.Template.Spec.Containers[0].Name != "app" {
		t.Fatalf("the object was changed: %+v", d.Spec)
	}
	// A value that encodes itself as an object is pruned as its JSON is; its numbers
	// stay as they were written.
	cr := &appsv1.ControllerRevision{Revision: 3, Data: runtime.RawExtension{Raw: []byte(`{"keep":12345678901234567890,"drop":{"x":2}}`)}}
	raw, err = fieldsOfPaths("data.keep").MarshalKept(cr)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"data":{"keep":12345678901234567890}}`; string(raw) != want {
		t.Fatalf("MarshalKept = %s, want %s", raw, want)
	}
}

// TestMarshalKeptOfNothing: nil, a nil pointer and a value that is no struct encode as
// encoding/json encodes them, without a panic.
func TestMarshalKeptOfNothing(t *testing.T) {
	f := fieldsOfPaths("spec.replicas")
	var d *appsv1.Deployment
	for _, v := range []any{nil, d, 3, appsv1.Deployment{}} {
		got, err := f.MarshalKept(v)
		if err != nil {
			t.Fatal(err)
		}
		if v == nil || v == any(d) {
			if string(got) != "null" {
				t.Fatalf("MarshalKept(%v) = %s, want null", v, got)
			}
		}
	}
	if got, _ := f.MarshalKept(3); string(got) != "3" {
		t.Fatalf("MarshalKept(3) = %s", got)
	}
}
