// Package security attacks the install as shipped, as a tenant would: config/default's
// RBAC applied to a real kube-apiserver that grants nothing else (no read grant of
// internal/testenv), convoy-observer run as a process with the token of its
// ServiceAccount and its Deployment's arguments, and tenants that hold no more than
// namespace edit plus the tenant roles of config/rbac in their own namespace. Each test
// is one class of attack of docs/security.md; each holds a positive control (the same
// attack with the door open, or the tenant's own object read) so that it cannot pass
// because nothing was read at all.
package security

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kumodo/convoy-observer/internal/testenv"
)

const (
	// namespace is config/default's.
	namespace = "convoy-system"
	// controllerManager stands in for the convoy controller: it writes ReleaseInventories
	// and Release status, which no tenant may.
	controllerManager = "convoy-controller-manager"
	// readerRole is config/rbac's unbound ClusterRole of a read identity.
	readerRole = "convoy-health-reader"
)

var (
	env *testenv.Env
	// observerKubeconfig holds the token of the ServiceAccount convoy-observer: the
	// credentials that a tenant would steal.
	observerKubeconfig, observerToken string
	observerLog                       string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "security suite: "+format+"\n", args...)
		return 1
	}
	dir, err := os.MkdirTemp("", "convoy-security-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(dir)
	root, err := testenv.RepoRoot()
	if err != nil {
		return fail("%v", err)
	}
	bin := filepath.Join(dir, "convoy-observer")
	build := exec.Command("go", "build", "-o", bin, "./cmd/convoy-observer")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fail("building convoy-observer: %v", err)
	}
	ctrllog.SetLogger(logr.Discard())
	if env, err = testenv.StartWith(testenv.Options{NoReadGrant: true}); err != nil {
		return fail("testenv: %v", err)
	}
	defer env.Stop()
	ctx := context.Background()
	args, err := applyRBAC(ctx, root)
	if err != nil {
		return fail("%v", err)
	}
	if observerKubeconfig, observerToken, err = tokenKubeconfig(ctx, dir, namespace, "convoy-observer"); err != nil {
		return fail("%v", err)
	}
	// convoy-api's stand-in: the wake-ups are accepted and not looked at.
	syncStub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}))
	defer syncStub.Close()
	observerLog = filepath.Join(dir, "convoy-observer.log")
	logf, err := os.Create(observerLog)
	if err != nil {
		return fail("%v", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, append(args, "--kubeconfig="+observerKubeconfig, "--sync-url="+syncStub.URL,
		"--health-probe-bind-address=0", "--metrics-bind-address=0")...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fail("starting convoy-observer: %v", err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	code := m.Run()
	if code != 0 {
		if b, err := os.ReadFile(observerLog); err == nil {
			fmt.Fprintf(os.Stderr, "--- the observer's log:\n%s\n", tail(string(b), 60))
		}
	}
	return code
}

// applyRBAC applies, of config/default rendered as `kubectl kustomize` does, its
// Namespace, ServiceAccounts, roles and bindings, and its default GlobalHealthRuleSet
// (the CRDs are testenv's); it returns the arguments of the observer's Deployment, less
// those that a process outside a pod replaces.
func applyRBAC(ctx context.Context, root string) ([]string, error) {
	objs, err := testenv.RenderDefault(root)
	if err != nil {
		return nil, err
	}
	var args []string
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "GlobalHealthRuleSet":
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("install"), client.ForceOwnership); err != nil {
				return nil, fmt.Errorf("applying %s %s of config/default: %w", u.GetKind(), u.GetName(), err)
			}
		case "Deployment":
			if u.GetName() != "convoy-observer" {
				continue
			}
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if len(cs) != 1 {
				return nil, fmt.Errorf("the Deployment convoy-observer has %d containers, want 1", len(cs))
			}
			all, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
			for _, a := range all {
				if strings.HasPrefix(a, "--health-probe-bind-address") || strings.HasPrefix(a, "--metrics-bind-address") {
					continue
				}
				args = append(args, strings.ReplaceAll(a, "$(POD_NAMESPACE)", namespace))
			}
		}
	}
	if args == nil {
		return nil, fmt.Errorf("config/default has no Deployment convoy-observer with arguments")
	}
	return args, nil
}

// tokenKubeconfig writes a kubeconfig that holds a token of the ServiceAccount ns/name
// (TokenRequest) and the API server's CA, and returns its path and the token.
func tokenKubeconfig(ctx context.Context, dir, ns, name string) (string, string, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return "", "", err
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", "", fmt.Errorf("TokenRequest for ServiceAccount %s/%s: %w", ns, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", "", err
	}
	return path, tr.Status.Token, nil
}

// tenant is a user who holds namespace edit (the rules that edit aggregates; the test API
// server runs no aggregation controller) and the tenant roles of config/rbac in its own
// namespace, and nothing else. Its namespace has the read identity
// that a platform sets up: the ServiceAccount convoy-health-reader bound to the
// ClusterRole of that name there.
type tenant struct {
	name, ns string
	c        client.Client
}

var tenantSeq sync.Mutex

func newTenant(t *testing.T, name string) *tenant {
	t.Helper()
	tenantSeq.Lock()
	defer tenantSeq.Unlock()
	ctx := context.Background()
	ns := fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1000000)
	must(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	for _, role := range []string{"system:aggregate-to-edit", "system:aggregate-to-view", "convoy-tenant-edit", "convoy-tenant-view"} {
		must(t, env.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + strings.ReplaceAll(role, ":", "-"), Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
		}))
	}
	// The platform's part: the read identity of the namespace.
	must(t, env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: readerRole, Namespace: ns}}))
	must(t, env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: readerRole, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: readerRole, Namespace: ns}},
	}))
	cfg, err := env.AddUser(name)
	must(t, err)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	must(t, err)
	return &tenant{name: name, ns: ns, c: c}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
