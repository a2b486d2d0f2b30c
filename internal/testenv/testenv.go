// Package testenv starts a real kube-apiserver and etcd (controller-runtime envtest) with
// this project's CRDs installed, for the integration tests of every package.
//
// The binaries come from hack/controlplane.sh, which builds them from the Go module proxy
// and caches them per version: KUBEBUILDER_ASSETS wins when it is set (make test sets
// it), else Start runs the script itself, so a plain `go test ./...` works too. There is
// no fallback to a fake: a test that needs the API server fails when it cannot start one.
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kumodo/convoy-observer/internal/scheme"
)

// Env is a running API server with the CRDs installed.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a direct (uncached) client with Scheme.
	Client client.Client
	// Scheme knows the built-in types and this project's types.
	Scheme *runtime.Scheme
	// RepoRoot is the directory holding go.mod.
	RepoRoot string

	env *envtest.Environment
	// users serializes envtest's AddUser: its certificate authority's serial number is
	// not safe for parallel tests.
	users sync.Mutex
}

// addUser is envtest's AddUser, one at a time.
func (e *Env) addUser(u envtest.User) (*envtest.AuthenticatedUser, error) {
	e.users.Lock()
	defer e.users.Unlock()
	return e.env.AddUser(u, nil)
}

// NewScheme returns the project's scheme (see internal/scheme).
func NewScheme() *runtime.Scheme { return scheme.New() }

// RepoRoot returns the nearest parent of the working directory that holds go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Assets returns the directory of the control-plane binaries: KUBEBUILDER_ASSETS, or what
// hack/controlplane.sh prints (building etcd and kube-apiserver when missing).
func Assets(root string) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "hack", "controlplane.sh"), "path", "etcd", "kube-apiserver")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/controlplane.sh: %w: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// Start starts etcd and kube-apiserver and installs the CRDs of config/crd/bases. Every
// ServiceAccount may read (get, list, watch) every object (ReadGrantName), so that the
// observer's impersonated read identity (docs/design.md, "Read identity") reads what the
// tests record, as it would once a platform granted it; StartWith with NoReadGrant leaves
// it out, for tests of what an identity may not read.
func Start() (*Env, error) { return start(true, Options{}) }

// StartTarget starts etcd and kube-apiserver without this project's CRDs: a target
// cluster as convoy sees it.
func StartTarget() (*Env, error) { return start(false, Options{}) }

// Options configure StartWith.
type Options struct {
	// Aggregation, when not nil, starts the kube-apiserver with its request-header
	// (front-proxy) flags and proxy client certificate, so that it can proxy to an
	// aggregated API server registered with Aggregation.RegisterAPIService.
	Aggregation *Aggregation
	// APIServerArgs are more kube-apiserver flags (name without "--" → value), e.g.
	// {"watch-cache": "false"} so that watches are served by etcd itself.
	APIServerArgs map[string]string
	// NoReadGrant leaves out the ClusterRoleBinding ReadGrantName that lets every
	// ServiceAccount read every object.
	NoReadGrant bool
}

// ReadGrantName names the ClusterRole and ClusterRoleBinding with which Start lets the
// group system:serviceaccounts get, list and watch every resource.
const ReadGrantName = "testenv-serviceaccounts-read"

// StartWith is Start with options.
func StartWith(o Options) (*Env, error) { return start(true, o) }

func start(withCRDs bool, o Options) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := Assets(root)
	if err != nil {
		return nil, err
	}
	sch := NewScheme()
	e := &envtest.Environment{BinaryAssetsDirectory: assets, Scheme: sch}
	// Without it, a stopping kube-apiserver waits for every open watch to end by itself
	// (minutes), so StopAPIServer times out once a client watches (informers do).
	e.ControlPlane.GetAPIServer().Configure().Set("shutdown-watch-termination-grace-period", "2s")
	if o.Aggregation != nil {
		args := e.ControlPlane.GetAPIServer().Configure()
		for k, v := range o.Aggregation.APIServerArgs() {
			args.Set(k, v)
		}
	}
	for k, v := range o.APIServerArgs {
		e.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	if withCRDs {
		e.CRDDirectoryPaths = []string{filepath.Join(root, "config", "crd", "bases")}
		e.ErrorIfCRDPathMissing = true
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with binaries from %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	env := &Env{Config: cfg, Client: c, Scheme: sch, RepoRoot: root, env: e}
	if withCRDs && !o.NoReadGrant {
		if err := env.grantServiceAccountsRead(); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return env, nil
}

// grantServiceAccountsRead creates the ClusterRole and ClusterRoleBinding ReadGrantName.
func (e *Env) grantServiceAccountsRead() error {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ReadGrantName},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ReadGrantName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ReadGrantName},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts"}}}
	for _, obj := range []client.Object{role, binding} {
		if err := e.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("granting ServiceAccounts read access (%s): %w", ReadGrantName, err)
		}
	}
	return nil
}

// MustStart is Start for TestMain: it exits the process with a message on error.
func MustStart() *Env {
	env, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	return env
}

// Main is the TestMain of a package whose tests share one API server: it starts it
// (MustStart), sets *env, runs the tests (m is the *testing.M, whose package the
// benchmark and demo binaries that use Env do not link), stops it and exits with the
// tests' code.
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
func Main(m interface{ Run() int }, env **Env) {
	*env = MustStart()
	code := m.Run()
	(*env).Stop()
	os.Exit(code)
}

// Stop stops the API server and etcd.
func (e *Env) Stop() {
	if e != nil && e.env != nil {
		_ = e.env.Stop()
	}
}

// AdminKubeconfig returns a kubeconfig for a user in system:masters on this API server.
func (e *Env) AdminKubeconfig() ([]byte, error) {
	user, err := e.addUser(envtest.User{Name: "convoy-admin", Groups: []string{"system:masters"}})
	if err != nil {
		return nil, fmt.Errorf("adding an admin user: %w", err)
	}
	return user.KubeConfig()
}

// AddUser returns a config that authenticates as user name in groups (a client
// certificate), without any permission unless RBAC grants some.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := e.addUser(envtest.User{Name: name, Groups: groups})
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	return rest.CopyConfig(u.Config()), nil
}

// EtcdURL returns the client URL of this control plane's etcd (plain HTTP on
// 127.0.0.1), for tests that act on etcd itself, such as a compaction.
func (e *Env) EtcdURL() string { return e.env.ControlPlane.Etcd.URL.String() }

// StopAPIServer stops kube-apiserver alone (etcd keeps the data), to make the cluster
// unreachable; StartAPIServer starts it again on the same address and certificates.
func (e *Env) StopAPIServer() error { return e.env.ControlPlane.APIServer.Stop() }

// StartAPIServer restarts the kube-apiserver that StopAPIServer stopped.
func (e *Env) StartAPIServer() error { return e.env.ControlPlane.APIServer.Start() }

// UserKubeconfig returns a kubeconfig for the user name in groups on this API server
// (no groups: a user that RBAC alone authorizes), for tests of what a narrower
// identity may do.
func (e *Env) UserKubeconfig(name string, groups ...string) ([]byte, error) {
	user, err := e.addUser(envtest.User{Name: name, Groups: groups})
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	return user.KubeConfig()
}
