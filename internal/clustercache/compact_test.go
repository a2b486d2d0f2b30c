package clustercache

import (
	"context"
	"errors"
	"math/rand"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// TestCompactForCache: the cache keeps a target object as its stripped JSON; the store
// keys it by namespace/name, the change handler sees its resourceVersion and kind, and
// every read decodes a fresh copy equal to the stripped object (numbers stay int64).
func TestCompactForCache(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "demo", "resourceVersion": "42",
			"managedFields": []any{map[string]any{"manager": "m"}},
			"annotations":   map[string]any{lastAppliedAnnotation: "{}", "keep": "me"},
		},
		"spec":   map[string]any{"replicas": int64(3)},
		"status": map[string]any{"readyReplicas": int64(3), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}},
	}}
	want := u.DeepCopy()
	want.SetManagedFields(nil)
	want.SetAnnotations(map[string]string{"keep": "me"})

	obj, err := compactForCache(nil, schema.GroupVersionKind{})(u)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := obj.(*compactObject)
	if !ok {
		t.Fatalf("cached as %T, want *compactObject", obj)
	}
	if key, err := toolscache.MetaNamespaceKeyFunc(c); err != nil || key != "demo/web" {
		t.Fatalf("store key = %q, %v", key, err)
	}
	if c.GetResourceVersion() != "42" || cachedKind(c) != "Deployment" {
		t.Fatalf("resourceVersion %q, kind %q", c.GetResourceVersion(), cachedKind(c))
	}
	got, err := cachedUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Object, want.Object) {
		t.Fatalf("read back %v, want %v", got.Object, want.Object)
	}
	got.Object["status"] = nil // a reader's change stays its own
	again, _ := cachedUnstructured(c)
	if again.Object["status"] == nil {
		t.Fatal("a read shares its maps with the cache")
	}
	tomb := toolscache.DeletedFinalStateUnknown{Key: "demo/web", Obj: c}
	if out, _ := compactForCache(nil, schema.GroupVersionKind{})(tomb); out != any(tomb) {
		t.Fatalf("a tombstone became %T", out)
	}
}

// syncAfter is an informer that reports synced once synced is set.
type syncAfter struct {
	toolscache.SharedIndexInformer
	synced atomic.Bool
}

func (s *syncAfter) HasSynced() bool { return s.synced.Load() }

// TestReadWaitsForAStreamingList (issue #12): a read waits for a first list that keeps
// delivering objects, however long it takes beyond SyncWait (a big list is not worth a
// GET per read), and gives up on one that delivered nothing for SyncWait (a cluster that
// stopped answering: the read then asks the server, which says so). Time is the cache's
// clock, here a fake one that the test steps.
func TestReadWaitsForAStreamingList(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := &targetWatches{opts: &Options{SyncWait: time.Second, Clock: clk}}
	inf := &syncAfter{}
	s := &scopeInformer{informer: inf, clock: clk}
	s.touch()
	done := make(chan error)
	go func() { done <- w.waitSynced(context.Background(), s) }()
	// Objects arrive every 20ms for 3 SyncWaits; then the list completes.
	for i := 0; i < 150; i++ {
		clk.Step(20 * time.Millisecond)
		s.touch()
	}
	inf.synced.Store(true)
	if err := stepUntil(clk, done); err != nil {
		t.Fatalf("a read gave up on a first list that kept streaming: %v", err)
	}

	if waited, err := waitOnASilentList(w, clk); !errors.Is(err, errStalled) {
		t.Fatalf("waiting for a first list that delivered nothing: %v, want %v", err, errStalled)
	} else if waited < time.Second {
		t.Fatalf("gave up on a silent first list after %v, before SyncWait (1s)", waited)
	}
}

// waitOnASilentList runs w.waitSynced on an informer whose first list delivers nothing,
// stepping clk until it returns; it returns the fake time it waited and its error.
func waitOnASilentList(w *targetWatches, clk *clocktesting.FakeClock) (time.Duration, error) {
	silent := &scopeInformer{informer: &syncAfter{}, clock: clk}
	silent.touch()
	start := clk.Now()
	done := make(chan error)
	go func() { done <- w.waitSynced(context.Background(), silent) }()
	err := stepUntil(clk, done)
	return clk.Since(start), err
}

// stepUntil steps clk by 10ms until done delivers, and returns what it delivered.
func stepUntil(clk *clocktesting.FakeClock, done <-chan error) error {
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Millisecond):
			clk.Step(10 * time.Millisecond)
		}
	}
}

// TestStripForCache: managedFields and the last-applied annotation go; the rest stays.
func TestStripForCache(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
		"name": "x", "managedFields": []any{map[string]any{"manager": "m"}},
		"annotations": map[string]any{lastAppliedAnnotation: "{}"},
	}, "status": map[string]any{"ready": true}}}
	out, err := stripForCache(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if got.GetManagedFields() != nil || got.GetAnnotations() != nil || got.Object["status"] == nil {
		t.Fatalf("stripped = %v", got.Object)
	}
}

// TestCompactReadsTheSameFromProtobufAndJSON: of random objects of built-in types, what a
// read returns is the same whether the object came as a Go object (a type watched in
// protobuf: kept fields only, encoded from the Go object, its empty structs dropped at
// the read) or as JSON (a type watched in JSON), with every field, with the fields of
// the shipped rule sets, and with fields that reach into lists, maps and values that
// encode themselves.
func TestCompactReadsTheSameFromProtobufAndJSON(t *testing.T) {
	var sets []extv1alpha1.GlobalHealthRuleSet
	files, _ := filepath.Glob(filepath.Join("..", "..", "health", "library", "*.yaml"))
	for _, file := range append(files, filepath.Join("..", "..", "health", "convoy-defaults.yaml")) {
		g, _ := manifesttest.RuleSets(t, file)
		sets = append(sets, g...)
	}
	shipped := health.FieldsOf(sets, nil)
	reaching := health.FieldsOf([]extv1alpha1.GlobalHealthRuleSet{{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{
		APIVersion: "*", Resources: []string{"*"},
		RuleExpression: "object.spec.template.spec.containers.all(c, c.image != '') && object.spec.strategy.rollingUpdate.maxSurge == 1 && " +
			"object.metadata.labels.app == 'x' && object.data.k == 'v' && object.spec.ports.exists(p, p.targetPort == 80)",
	}}}}}, nil)
	fill := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(11), serializer.NewCodecFactory(clientgoscheme.Scheme)).NilChance(0.2).NumElements(0, 2)
	for _, example := range []runtime.Object{
		&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &batchv1.Job{}, &corev1.Pod{},
		&corev1.Service{}, &corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{},
	} {
		gvks, _, err := clientgoscheme.Scheme.ObjectKinds(example)
		if err != nil {
			t.Fatal(err)
		}
		gvk := gvks[0]
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		for i := range 30 {
			obj := example.DeepCopyObject()
			fill.Fill(obj)
			obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{}) // as protobuf decodes it
			for _, fields := range []*health.Fields{nil, shipped.For(gvk.GroupVersion().String(), plural.Resource),
				reaching.For(gvk.GroupVersion().String(), plural.Resource)} {
				content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj.DeepCopyObject())
				if err != nil {
					t.Fatal(err)
				}
				u := &unstructured.Unstructured{Object: content}
				u.SetGroupVersionKind(gvk)
				fromJSON, _ := compact(u, fields, schema.GroupVersionKind{})
				fromGo, _ := compact(obj.DeepCopyObject(), fields, gvk)
				want, err := cachedUnstructured(fromJSON)
				if err != nil {
					t.Fatal(err)
				}
				got, err := cachedUnstructured(fromGo)
				if err != nil {
					t.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(got.Object, want.Object) {
					t.Fatalf("%s #%d with fields %s: a read differs:\n%s", gvk.Kind, i, fields, diff.Diff(want.Object, got.Object))
				}
			}
		}
	}
}

// BenchmarkCompactDeployment: what the cache spends on one Deployment watched in
// protobuf, with the fields of convoy-defaults: the transform, then one read; and the
// bytes of JSON it keeps (kept-bytes).
func BenchmarkCompactDeployment(b *testing.B) {
	g, _ := manifesttest.RuleSets(b, filepath.Join("..", "..", "health", "convoy-defaults.yaml"))
	fields := health.FieldsOf(g, nil).For("apps/v1", "deployments")
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	labels := map[string]string{"app": "web", "release": "r1"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench-1", Name: "r1-d1", UID: "6c9f1a2e-0b8e-4f3c-9a57-2d1d7f0e4b11", ResourceVersion: "123456",
			Generation: 1, CreationTimestamp: metav1.Now(), Labels: labels, Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.2.3",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "r1-d1-5d8f" has successfully progressed.`}}},
	}
	b.ReportAllocs()
	kept := 0
	for b.Loop() {
		obj, err := compact(d.DeepCopy(), fields, gvk)
		if err != nil {
			b.Fatal(err)
		}
		kept = len(obj.(*compactObject).raw)
		if _, err := cachedUnstructured(obj); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(kept), "kept-bytes")
}
