package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"sync"
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
	"github.com/kumodo/convoy-observer/internal/testenv/selfexec"
)

// The release commands are tested against a real kube-apiserver and etcd, started on
// first use (the health eval tests need none) and stopped by TestMain.
var (
	cpOnce sync.Once
	cpEnv  *testenv.Env
	cpErr  error
)

func TestMain(m *testing.M) {
	selfexec.MainIfChild(main) // the test binary stands for convoyctl (see convoyctlCommand)
	code := m.Run()
	if cpEnv != nil {
		cpEnv.Stop()
	}
	os.Exit(code)
}

// controlPlane returns the shared API server with the CRDs, starting it on first use.
func controlPlane(t *testing.T) *testenv.Env {
	t.Helper()
	cpOnce.Do(func() { cpEnv, cpErr = testenv.Start() })
	if cpErr != nil {
		t.Fatalf("starting the control plane: %v", cpErr)
	}
	return cpEnv
}

// adminKubeconfig writes a kubeconfig of env's admin user to a file, for --kubeconfig,
// and returns its path.
func adminKubeconfig(t *testing.T, env *testenv.Env) string {
	t.Helper()
	kc, err := env.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "kubeconfig", string(kc))
}

// apiServer serves convoy-api's routes (the generic server in-process, without
// authentication) over the control plane, and returns its URL. Like convoy-api it
// answers /health from the Release and its inventory only.
func apiServer(t *testing.T, env *testenv.Env) string {
	t.Helper()
	e := syncapiserver.NewEndpoints(env.Client)
	e.Log = logr.Discard()
	h, err := apiserver.NewUnauthenticatedHandler(e)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Field managers of the two writers of a ReleaseInventory.
const (
	cmManager  = "convoy-controller-manager"
	invManager = "convoy-health-inventory"
)

// testRelease is a Release of namespace default whose inventory the test writes as the
// controller-manager and the observer would.
type testRelease struct {
	t    *testing.T
	env  *testenv.Env
	name string
}

// newTestRelease creates the Release default/name at lastAttempted render, and its
// inventory with one entry per name in deployments (wave 0, render), recorded by the
// controller-manager and not assessed yet.
func newTestRelease(t *testing.T, env *testenv.Env, name, render string, deployments ...string) *testRelease {
	t.Helper()
	ctx := context.Background()
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.ReleaseSpec{
			ClusterRef:       v1alpha1.ClusterReference{Name: "target"},
			HealthAssessment: &v1alpha1.HealthAssessment{},
		},
	}
	if err := env.Client.Create(ctx, rel); err != nil {
		t.Fatalf("create release %s: %v", name, err)
	}
	rel.Status.LastAttempted = &v1alpha1.AttemptStatus{RenderRef: render}
	if err := env.Client.Status().Update(ctx, rel); err != nil {
		t.Fatalf("set lastAttempted of %s: %v", name, err)
	}
	r := &testRelease{t: t, env: env, name: name}
	var entries []*acv1alpha1.InventoryEntryApplyConfiguration
	for _, d := range deployments {
		entries = append(entries, deployment(d).WithVersion("v1").WithResource("deployments").WithWave(0).WithRenderRef(render))
	}
	r.apply(cmManager, entries)
	return r
}

// assess writes, as the observer, the state and message of each Deployment (name →
// [state, message]) assessed at render, with rulesApplied 0 and no decidedBy: the
// Release selects no rule, so none judges or decides an entry.
func (r *testRelease) assess(render string, states map[string][2]string) {
	r.t.Helper()
	r.assessWith(render, states, true)
}

// assessUnrecorded is assess as an observer that records neither decidedBy nor
// rulesApplied writes the entries.
func (r *testRelease) assessUnrecorded(render string, states map[string][2]string) {
	r.t.Helper()
	r.assessWith(render, states, false)
}

func (r *testRelease) assessWith(render string, states map[string][2]string, recordRules bool) {
	r.t.Helper()
	var entries []*acv1alpha1.InventoryEntryApplyConfiguration
	for name, sm := range states {
		e := deployment(name).WithState(v1alpha1.HealthState(sm[0])).WithAssessedRenderRef(render)
		if sm[1] != "" {
			e.WithMessage(sm[1])
		}
		if recordRules {
			e.WithRulesApplied(0)
		}
		entries = append(entries, e)
	}
	r.apply(invManager, entries)
}

// deployment is the key of the inventory entry of the Deployment default/name.
func deployment(name string) *acv1alpha1.InventoryEntryApplyConfiguration {
	return acv1alpha1.InventoryEntry().WithGroup("apps").WithKind("Deployment").WithNamespace("default").WithName(name)
}

// entryKey is the key of the inventory entry of the core object kind default/name.
func entryKey(kind, name string) *acv1alpha1.InventoryEntryApplyConfiguration {
	return acv1alpha1.InventoryEntry().WithGroup("").WithKind(kind).WithNamespace("default").WithName(name)
}

func (r *testRelease) apply(manager string, entries []*acv1alpha1.InventoryEntryApplyConfiguration) {
	r.t.Helper()
	ac := acv1alpha1.ReleaseInventory(r.name, "default").WithEntries(entries...)
	if err := r.env.Client.Apply(context.Background(), ac, client.FieldOwner(manager), client.ForceOwnership); err != nil {
		r.t.Fatalf("apply inventory %s as %s: %v", r.name, manager, err)
	}
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// started runs convoyctl with args in the background; the returned function waits for
// its exit status.
func started(ctx context.Context, args ...string) (stdout, stderr *syncBuffer, wait func() int) {
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- runContext(ctx, args, stdout, stderr) }()
	return stdout, stderr, func() int {
		select {
		case code := <-done:
			return code
		case <-time.After(time.Minute):
			return -1
		}
	}
}

// eventually polls cond every 50 ms for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
