package healthloop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"sync/atomic"
	"testing"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/controllerkit"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
	"github.com/kumodo/convoy-observer/internal/metaapply"
	"github.com/kumodo/convoy-observer/internal/syncapi/apiserver"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
	syncapiserver "github.com/kumodo/convoy-observer/internal/syncapi/server"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// cmManager is the field manager that plays convoy's controller-manager in the tests.
const cmManager = "convoy-controller-manager"

// t0 is the fake clock's start: whole seconds, so stored anchors round-trip exactly.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fixture is one test's namespace, Cluster, Release and the loop under test.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	rel   string
	key   string
	clock *clocktesting.FakeClock
	h     *HealthController
	api   *syncServer
}

// syncServer is convoy-api's routes (the generic server in-process, without
// authentication) behind an httptest server that counts the
// sync requests and can be told to fail them.
type syncServer struct {
	*httptest.Server
	syncs    atomic.Int32
	fail     atomic.Bool
	notFound atomic.Bool
}

func newSyncServer(t *testing.T) *syncServer {
	s := &syncServer{}
	handler, err := apiserver.NewUnauthenticatedHandler(syncapiserver.NewEndpoints(env.Client))
	if err != nil {
		t.Fatal(err)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if s.notFound.Load() { // convoy-api's answer for a Release that does not exist
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				st := apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("releases").GroupResource(), path.Base(path.Dir(r.URL.Path))).Status()
				st.Kind, st.APIVersion = "Status", "v1"
				_ = json.NewEncoder(w).Encode(st)
				return
			}
			if s.fail.Load() {
				http.Error(w, "injected failure", http.StatusServiceUnavailable)
				return
			}
			s.syncs.Add(1)
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

var nsCounter atomic.Int32

// newFixture creates a namespace, a local Cluster "target" and a loop with a fake clock,
// reading straight from the API server (no cache lag) so tests drive passes directly.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("t%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))
	must(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "target", Namespace: ns}}))
	f := &fixture{t: t, ctx: ctx, ns: ns, rel: "app", key: ns + "/app", clock: clocktesting.NewFakeClock(t0)}
	f.api = newSyncServer(t)
	f.h = f.newController()
	return f
}

// newController returns a fresh loop instance (no in-memory state) on f's clock.
func (f *fixture) newController() *HealthController {
	// Plain http:// is allowed: the servers of reflect_test.go that are no Kubernetes API
	// server are http (the refusal itself is internal/kubeconfig's test).
	clusters := clustercache.New(clustercache.Options{Local: env.Config, SecretReader: env.Client,
		Kubeconfig: kubeconfig.Options{AllowInsecureHTTP: true}})
	h := NewHealthController(env.Client, metadataWriter(f.t), clusters, NewShardGate(nil),
		&syncapiclient.Client{BaseURL: f.api.URL})
	h.Clock = f.clock
	h.Rand = func() float64 { return 0 }
	return h
}

// metadataWriter is the loop's writer as convoy-observer builds it: env.Client, its
// applies answered with the object's metadata only (metaapply).
func metadataWriter(t *testing.T) client.Client {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(env.Config)
	must(t, err)
	w, err := metaapply.New(env.Client, env.Config, httpClient)
	must(t, err)
	return w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// release creates the Release with the given healthAssessment (nil: none).
func (f *fixture) release(ha *v1alpha1.HealthAssessment, interval time.Duration) {
	f.t.Helper()
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: f.rel, Namespace: f.ns},
		Spec:       v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"}, HealthAssessment: ha},
	}
	if interval > 0 {
		rel.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Interval: &metav1.Duration{Duration: interval}}
	}
	must(f.t, env.Client.Create(f.ctx, rel))
}

// localRules is a healthAssessment selecting every HealthRuleSet of the namespace.
func localRules(deadline time.Duration) *v1alpha1.HealthAssessment {
	ha := &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{}}
	if deadline > 0 {
		ha.Deadline = &metav1.Duration{Duration: deadline}
	}
	return ha
}

// configMapRules creates a HealthRuleSet: a ConfigMap passes when data.ready == "true".
func (f *fixture) configMapRules(name, rule string) {
	f.t.Helper()
	rs := &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{{
			APIVersion: "v1", Resources: []string{"configmaps"},
			RuleExpression:    rule,
			MessageExpression: "'ready=' + object.?data.?ready.orValue('<unset>')",
		}}},
	}
	must(f.t, env.Client.Create(f.ctx, rs))
}

const readyRule = "object.?data.?ready.orValue('') == 'true'"

// configMap creates or updates ConfigMap name in f's namespace with data.ready.
func (f *fixture) configMap(name, ready string) {
	f.t.Helper()
	ac := corev1ac.ConfigMap(name, f.ns).WithData(map[string]string{"ready": ready})
	must(f.t, env.Client.Apply(f.ctx, ac, client.FieldOwner("test"), client.ForceOwnership))
}

// cmEntry is an inventory entry as the controller-manager records it.
type cmEntry struct {
	group, version, kind, resource, namespace, name string
	wave                                            int64
	renderRef                                       string
}

func cm(name string, wave int64, render string) cmEntry {
	return cmEntry{version: "v1", kind: "ConfigMap", resource: "configmaps", name: name, wave: wave, renderRef: render}
}

// inventory applies the inventory's entries as the controller-manager (a non-forced
// apply: it must never conflict with the observer's fields).
func (f *fixture) inventory(entries ...cmEntry) {
	f.t.Helper()
	ac := acv1alpha1.ReleaseInventory(f.rel, f.ns)
	for _, e := range entries {
		ns := e.namespace
		if ns == "" && e.kind != "PersistentVolume" {
			ns = f.ns
		}
		ac.WithEntries(acv1alpha1.InventoryEntry().WithGroup(e.group).WithKind(e.kind).WithNamespace(ns).WithName(e.name).
			WithVersion(e.version).WithResource(e.resource).WithWave(int32(e.wave)).WithRenderRef(e.renderRef))
	}
	must(f.t, env.Client.Apply(f.ctx, ac, client.FieldOwner(cmManager)))
}

// lastAttempted sets status.lastAttempted.renderRef as the controller-manager.
func (f *fixture) lastAttempted(render string) {
	f.t.Helper()
	ac := acv1alpha1.Release(f.rel, f.ns).WithStatus(acv1alpha1.ReleaseStatus().
		WithLastAttempted(acv1alpha1.AttemptStatus().WithRenderRef(render)))
	must(f.t, env.Client.Status().Apply(f.ctx, ac, client.FieldOwner(cmManager)))
}

// pass runs one syncHandler pass and fails the test on error.
func (f *fixture) pass() controllerkit.Result {
	f.t.Helper()
	res, err := f.h.syncHandler(f.ctx, f.key)
	if err != nil {
		f.t.Fatalf("pass: %v", err)
	}
	return res
}

func (f *fixture) getRelease() *v1alpha1.Release {
	f.t.Helper()
	rel := &v1alpha1.Release{}
	must(f.t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: f.rel}, rel))
	return rel
}

func (f *fixture) getInventory() *v1alpha1.ReleaseInventory {
	f.t.Helper()
	inv := &v1alpha1.ReleaseInventory{}
	must(f.t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: f.rel}, inv))
	return inv
}

// healthy returns the Healthy condition, failing when there is none.
func (f *fixture) healthy() metav1.Condition {
	f.t.Helper()
	c := meta.FindStatusCondition(f.getRelease().Status.Conditions, v1alpha1.ConditionHealthy)
	if c == nil {
		f.t.Fatalf("no Healthy condition")
	}
	return *c
}

// expectCondition checks the Healthy condition's status and reason.
func (f *fixture) expectCondition(status metav1.ConditionStatus, reason string) metav1.Condition {
	f.t.Helper()
	c := f.healthy()
	if c.Status != status || c.Reason != reason {
		f.t.Fatalf("Healthy = %s/%s (%s), want %s/%s", c.Status, c.Reason, c.Message, status, reason)
	}
	return c
}

// entry returns the inventory entry of the ConfigMap name.
func (f *fixture) entry(name string) v1alpha1.InventoryEntry {
	f.t.Helper()
	for _, e := range f.getInventory().Entries {
		if e.Name == name {
			return e
		}
	}
	f.t.Fatalf("no inventory entry %s", name)
	return v1alpha1.InventoryEntry{}
}

func (f *fixture) expectEntry(name string, state v1alpha1.HealthState, message string) v1alpha1.InventoryEntry {
	f.t.Helper()
	e := f.entry(name)
	if e.State != state || e.Message != message {
		f.t.Fatalf("entry %s = %s %q, want %s %q", name, e.State, e.Message, state, message)
	}
	return e
}

// eventually polls cond for up to 30s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}
