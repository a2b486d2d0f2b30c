package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kumodo/convoy-observer/internal/syncapi/apiserver"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// The suite runs one kube-apiserver with the aggregation layer and one convoy-api
// behind it, started in this process as the ServiceAccount convoy-system/convoy-api with
// exactly the RBAC of config/rbac, registered with the APIService
// v1alpha1.subresources.convoy.kumodo.io: requests really flow user → kube-apiserver →
// convoy-api.
var (
	env  *testenv.Env
	agg  *testenv.Aggregation
	api  *apiserver.Server
	port int
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "convoy-api-agg")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dir)
		if agg, err = testenv.NewAggregation(dir); err != nil {
			return fail(err)
		}
		// No read grant: it would let every ServiceAccount get any subresource, /health
		// included, and the suite checks what config/rbac alone allows.
		if env, err = testenv.StartWith(testenv.Options{Aggregation: agg, NoReadGrant: true}); err != nil {
			return fail(err)
		}
		defer env.Stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stopped, err := startAPI(ctx, dir)
		if err != nil {
			return fail(err)
		}
		code := m.Run()
		cancel()
		<-stopped
		return code
	}())
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "apiserver tests: %v\n", err)
	return 1
}

// startAPI installs the RBAC of config/rbac, writes a kubeconfig with a token of the
// ServiceAccount convoy-api, starts convoy-api on a free port of 127.0.0.1 with the
// serving pair of agg, and registers it; the channel is closed when it has stopped.
func startAPI(ctx context.Context, dir string) (<-chan struct{}, error) {
	for _, f := range []string{"rbac/api_service_account.yaml", "rbac/api_role.yaml", "rbac/api_role_binding.yaml",
		"rbac/api_auth_delegator_binding.yaml", "rbac-kube-system/api_auth_reader_binding.yaml", "rbac/subresources_user_roles.yaml",
		"rbac/observer_service_account.yaml", "rbac/observer_role.yaml", "rbac/observer_role_binding.yaml"} {
		if f == "rbac/api_service_account.yaml" {
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.APIServiceNS}}); err != nil {
				return nil, err
			}
		}
		if err := testenv.ApplyFile(ctx, env.Client, filepath.Join(env.RepoRoot, "config", f), "convoy-test"); err != nil {
			return nil, err
		}
	}
	kubeconfig, err := serviceAccountKubeconfig(ctx, dir, testenv.APIServiceNS, "convoy-api")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port = ln.Addr().(*net.TCPAddr).Port
	o := apiserver.NewOptions()
	o.Kubeconfig = kubeconfig
	o.SecureServing.Listener, o.SecureServing.BindPort = ln, port
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	o.SecureServing.ServerCert.CertKey.CertFile, o.SecureServing.ServerCert.CertKey.KeyFile = agg.ServingCertFile, agg.ServingKeyFile
	if err := o.Complete(); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if api, err = apiserver.New(o); err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := api.Run(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "convoy-api: %v\n", err)
		}
	}()
	if err := waitReady(ctx); err != nil {
		return nil, err
	}
	if err := agg.RegisterAPIService(ctx, env.Client, port); err != nil {
		return nil, err
	}
	return stopped, nil
}

// serviceAccountKubeconfig writes a kubeconfig for the ServiceAccount ns/name (a token
// from the TokenRequest API) and returns its path.
func serviceAccountKubeconfig(ctx context.Context, dir, ns, name string) (string, error) {
	cfg, err := serviceAccountConfig(ctx, ns, name)
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// serviceAccountConfig returns a config that authenticates as the ServiceAccount
// ns/name, creating it when missing.
func serviceAccountConfig(ctx context.Context, ns, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		return nil, err
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of ServiceAccount %s/%s: %w", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// waitReady waits until convoy-api's /readyz answers 200.
func waitReady(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(agg.ServingCA)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		resp, err := hc.Get(apiURL() + "/readyz")
		if err != nil {
			return false, nil //nolint:nilerr // polled again until the timeout
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// apiURL is convoy-api's own address.
func apiURL() string { return "https://127.0.0.1:" + strconv.Itoa(port) }

// eventually retries f until it returns nil or d passes.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
