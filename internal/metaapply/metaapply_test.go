package metaapply_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/metaapply"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// answers records the Content-Type of the answers to PATCH requests.
type answers struct {
	mu    sync.Mutex
	types []string
}

func (a *answers) RoundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := rt.RoundTrip(req)
	if err == nil && req.Method == http.MethodPatch {
		a.mu.Lock()
		a.types = append(a.types, resp.Header.Get("Content-Type"))
		a.mu.Unlock()
	}
	return resp, err
}

func (a *answers) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.types
	a.types = nil
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// writer returns a metaapply writer over a client of env's API server, and what records
// the answers it gets.
func writer(t *testing.T) (client.Client, *answers) {
	t.Helper()
	a := &answers{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) { return a.RoundTrip(rt, r) })
	})
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme, HTTPClient: httpClient})
	if err != nil {
		t.Fatal(err)
	}
	w, err := metaapply.New(c, cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	return w, a
}

// namespace creates a namespace of its own for the test (prefix, then a number) and
// returns its name.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// TestApplyIsAnsweredWithMetadata: an apply and a status apply write what they send,
// under their field manager, are answered with the object's metadata only (a
// PartialObjectMetadata), and leave the answer's resourceVersion and annotations on the
// apply configuration, as the API server has them after the write.
func TestApplyIsAnsweredWithMetadata(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "answers")
	w, a := writer(t)
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app",
		Annotations: map[string]string{v1alpha1.SyncRequestedAtAnnotation: "2026-12-07T10:00:00Z"}},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"}}}
	if err := env.Client.Create(ctx, rel); err != nil {
		t.Fatal(err)
	}

	cond := metav1ac.Condition().WithType(v1alpha1.ConditionHealthy).WithStatus(metav1.ConditionTrue).
		WithReason(v1alpha1.ReasonHealthy).WithMessage("1/1 healthy").WithLastTransitionTime(metav1.Now())
	ac := acv1alpha1.Release("app", ns).WithStatus(acv1alpha1.ReleaseStatus().WithConditions(cond))
	if err := w.Status().Apply(ctx, ac, client.FieldOwner("metaapply-test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	live := &v1alpha1.Release{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rel), live); err != nil {
		t.Fatal(err)
	}
	if len(live.Status.Conditions) != 1 || live.Status.Conditions[0].Message != "1/1 healthy" {
		t.Errorf("the status apply wrote %+v", live.Status.Conditions)
	}
	if ac.ResourceVersion == nil || *ac.ResourceVersion != live.ResourceVersion {
		t.Errorf("resourceVersion on the apply configuration: %v, the API server has %s", ac.ResourceVersion, live.ResourceVersion)
	}
	if ac.Annotations[v1alpha1.SyncRequestedAtAnnotation] != "2026-12-07T10:00:00Z" || ac.UID == nil || *ac.UID != live.UID {
		t.Errorf("the answer's metadata is not on the apply configuration: annotations %v, uid %v", ac.Annotations, ac.UID)
	}
	owned := false
	for _, mf := range live.ManagedFields {
		owned = owned || (mf.Manager == "metaapply-test" && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == "status")
	}
	if !owned {
		t.Errorf("no Apply of the status by metaapply-test in managedFields: %+v", live.ManagedFields)
	}

	inv := acv1alpha1.ReleaseInventory("app", ns).WithEntries(acv1alpha1.InventoryEntry().
		WithGroup("apps").WithKind("Deployment").WithNamespace(ns).WithName("web").WithState(v1alpha1.StateHealthy))
	if err := w.Apply(ctx, inv, client.FieldOwner("metaapply-test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if inv.ResourceVersion == nil || *inv.ResourceVersion == "" || inv.UID == nil {
		t.Errorf("the inventory apply left no resourceVersion or uid: %v, %v", inv.ResourceVersion, inv.UID)
	}
	// A custom resource has no protobuf encoding: one in protobuf is its metadata.
	got := a.take()
	if len(got) != 2 {
		t.Errorf("%d answers to PATCH requests recorded, want 2", len(got))
	}
	for _, ct := range got {
		if !strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf") && !strings.Contains(ct, "as=PartialObjectMetadata") {
			t.Errorf("an apply was answered with %q, not with the object's metadata", ct)
		}
	}
}

// TestApplyErrorsAreTheAPIServers: the preconditions and field conflicts of an apply
// fail as they do through controller-runtime's client (the same apierrors reason), and
// an apply configuration without a name or of an unknown kind is refused.
func TestApplyErrorsAreTheAPIServers(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "errors")
	w, _ := writer(t)
	entry := func(state v1alpha1.HealthState) *acv1alpha1.InventoryEntryApplyConfiguration {
		return acv1alpha1.InventoryEntry().WithGroup("apps").WithKind("Deployment").WithNamespace(ns).
			WithName("web").WithState(state)
	}
	first := acv1alpha1.ReleaseInventory("app", ns).WithEntries(entry(v1alpha1.StateProgressing))
	if err := w.Apply(ctx, first, client.FieldOwner("owner-a"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	rv, uid := *first.ResourceVersion, *first.UID
	otherUID := types.UID("0" + string(uid)[1:])
	if otherUID == uid {
		otherUID = types.UID("1" + string(uid)[1:])
	}
	if err := w.Apply(ctx, acv1alpha1.ReleaseInventory("app", ns).WithResourceVersion(rv).
		WithEntries(entry(v1alpha1.StateHealthy)), client.FieldOwner("owner-a"), client.ForceOwnership); err != nil {
		t.Fatalf("an apply at the current resourceVersion: %v", err)
	}

	for _, c := range []struct {
		name string
		ac   *acv1alpha1.ReleaseInventoryApplyConfiguration
		opts []client.ApplyOption
		want metav1.StatusReason
	}{
		{"an old resourceVersion", acv1alpha1.ReleaseInventory("app", ns).WithResourceVersion(rv),
			[]client.ApplyOption{client.FieldOwner("owner-a"), client.ForceOwnership}, metav1.StatusReasonConflict},
		{"another uid", acv1alpha1.ReleaseInventory("app", ns).WithUID(otherUID),
			[]client.ApplyOption{client.FieldOwner("owner-a"), client.ForceOwnership}, metav1.StatusReasonInvalid},
		{"owner-a's field by owner-b without force", acv1alpha1.ReleaseInventory("app", ns),
			[]client.ApplyOption{client.FieldOwner("owner-b")}, metav1.StatusReasonConflict},
	} {
		viaMetadata := w.Apply(ctx, c.ac.WithEntries(entry(v1alpha1.StateDegraded)), c.opts...)
		viaClient := env.Client.Apply(ctx, c.ac, c.opts...)
		if got := apierrors.ReasonForError(viaMetadata); got != c.want || got != apierrors.ReasonForError(viaClient) {
			t.Errorf("%s: %v (%s) through metaapply, %v (%s) through controller-runtime's client, want %s",
				c.name, viaMetadata, got, viaClient, apierrors.ReasonForError(viaClient), c.want)
		}
	}
	if err := w.Apply(ctx, acv1alpha1.ReleaseInventory("app", ns).WithEntries(entry(v1alpha1.StateDegraded)),
		client.FieldOwner("owner-b"), client.ForceOwnership); err != nil {
		t.Errorf("owner-a's field by owner-b with force: %v", err)
	}

	if err := w.Apply(ctx, corev1ac.ConfigMap("", ns), client.FieldOwner("owner-a")); err == nil {
		t.Error("an apply configuration without a name was sent")
	}
	if err := w.Apply(ctx, corev1ac.ConfigMap("cm", ns).WithAPIVersion("v9").WithKind("Nothing"), client.FieldOwner("owner-a")); err == nil {
		t.Error("an apply configuration of an unknown kind was sent")
	}
}
