package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi/apiserver"
	syncapiserver "github.com/kumodo/convoy-observer/internal/syncapi/server"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// Field managers of the writers of a ReleaseInventory in these tests.
const (
	cmManager   = "convoy-controller-manager"
	invManager  = "convoy-health-inventory"
	hookManager = "convoy-hook-status"
)

// newServer serves convoy-api's routes over Endpoints of env.Client whose clock is now.
func newServer(t *testing.T, now func() time.Time) (*httptest.Server, *syncapiserver.Endpoints) {
	t.Helper()
	e := syncapiserver.NewEndpoints(env.Client)
	e.Log = logr.Discard()
	if now != nil {
		e.Now = now
	}
	return serve(t, e), e
}

// serve serves convoy-api's routes over e in-process, as the generic server routes
// them (without authentication and authorization), until the test ends.
func serve(t *testing.T, e *syncapiserver.Endpoints) *httptest.Server {
	t.Helper()
	h, err := apiserver.NewUnauthenticatedHandler(e)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// do sends a body-less request and returns the status, headers and body.
func do(t *testing.T, method, url string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// createRelease creates the Release default/name and sets its lastAttempted renderRef
// when renderRef is not empty.
func createRelease(t *testing.T, name, renderRef string, annotations map[string]string) *v1alpha1.Release {
	t.Helper()
	ctx := context.Background()
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec: v1alpha1.ReleaseSpec{
			ClusterRef:       v1alpha1.ClusterReference{Name: "target"},
			HealthAssessment: &v1alpha1.HealthAssessment{Deadline: &metav1.Duration{Duration: 5 * time.Minute}},
		},
	}
	if err := env.Client.Create(ctx, rel); err != nil {
		t.Fatalf("create release %s: %v", name, err)
	}
	if renderRef != "" {
		rel.Status.LastAttempted = &v1alpha1.AttemptStatus{RenderRef: renderRef}
		if err := env.Client.Status().Update(ctx, rel); err != nil {
			t.Fatalf("set lastAttempted of %s: %v", name, err)
		}
	}
	return rel
}

func getRelease(t *testing.T, name string) *v1alpha1.Release {
	t.Helper()
	rel := &v1alpha1.Release{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, rel); err != nil {
		t.Fatalf("get release %s: %v", name, err)
	}
	return rel
}

// mustApply server-side applies the ReleaseInventory default/name with entries and
// hooks as manager, forcing ownership.
func mustApply(t *testing.T, manager, name string, entries []*acv1alpha1.InventoryEntryApplyConfiguration, hooks ...*acv1alpha1.HookEntryApplyConfiguration) {
	t.Helper()
	ac := acv1alpha1.ReleaseInventory(name, "default").WithEntries(entries...).WithHooks(hooks...)
	err := env.Client.Apply(context.Background(), ac, client.FieldOwner(manager), client.ForceOwnership)
	if err != nil {
		t.Fatalf("apply inventory %s as %s: %v", name, manager, err)
	}
}

// entry is an inventory entry with its four keys and the given fields.
func entry(group, kind, ns, name string) *acv1alpha1.InventoryEntryApplyConfiguration {
	return acv1alpha1.InventoryEntry().WithGroup(group).WithKind(kind).WithNamespace(ns).WithName(name)
}

// assessed is the entry as the observer writes it: state, assessedRenderRef render,
// message and firstUnhealthy when set.
func assessed(group, kind, ns, name string, state v1alpha1.HealthState, render, message string, firstUnhealthy *metav1.Time) *acv1alpha1.InventoryEntryApplyConfiguration {
	e := entry(group, kind, ns, name).WithState(state).WithAssessedRenderRef(render)
	if message != "" {
		e.WithMessage(message)
	}
	if firstUnhealthy != nil {
		e.WithFirstUnhealthy(*firstUnhealthy)
	}
	return e
}

// at parses an RFC 3339 time.
func at(t *testing.T, s string) *metav1.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	mt := metav1.NewTime(ts)
	return &mt
}

// decodeStatus decodes a metav1.Status error body.
func decodeStatus(t *testing.T, body []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("body is not a Status (%v): %s", err, body)
	}
	return st
}

func mustContain(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%s = %q, want it to contain %q", what, got, want)
	}
}

// getInventoryJSON returns the ReleaseInventory default/name as JSON.
func getInventoryJSON(t *testing.T, name string) string {
	t.Helper()
	inv := &v1alpha1.ReleaseInventory{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, inv); err != nil {
		t.Fatalf("get inventory %s: %v", name, err)
	}
	b, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
