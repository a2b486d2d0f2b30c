package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	logsapi "k8s.io/component-base/logs/api/v1"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
	"github.com/kumodo/convoy-observer/internal/testenv"
	"github.com/kumodo/convoy-observer/internal/testenv/selfexec"
)

var (
	env        *testenv.Env
	kubeconfig string // an admin kubeconfig file for env
)

// TestMain starts a kube-apiserver with the aggregation layer's request-header flags:
// without a request-header CA in kube-system/extension-apiserver-authentication, the
// client-certificate authentication of an aggregated API server does not work either.
func TestMain(m *testing.M) {
	selfexec.MainIfChild(main) // selfexec.Run's child: the binary itself
	// The tests run the command many times in this process, each applying the same
	// logging configuration.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	// Applied once here, before any test runs: the first apply sets klog's global logger,
	// which the parallel tests' clients read (a data race when a test's run applied it).
	if err := logsapi.ValidateAndApply(logsapi.NewLoggingConfiguration(), nil); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "convoy-api-test")
	if err != nil {
		panic(err)
	}
	agg, err := testenv.NewAggregation(dir)
	if err != nil {
		panic(err)
	}
	if env, err = testenv.StartWith(testenv.Options{Aggregation: agg}); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	code := func() int {
		defer env.Stop()
		defer os.RemoveAll(dir)
		data, err := env.AdminKubeconfig()
		if err != nil {
			panic(err)
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
			panic(err)
		}
		return m.Run()
	}()
	os.Exit(code)
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert-file", "c.pem"}, "must be given together"},
		{"key without cert", []string{"--tls-private-key-file", "k.pem"}, "must be given together"},
		{"unknown flag", []string{"--nope"}, "unknown flag: --nope"},
		{"argument", []string{"serve"}, `unexpected argument "serve"`},
		{"address with a port", []string{"--bind-address", "127.0.0.1:8090"}, `invalid argument "127.0.0.1:8090" for "--bind-address"`},
		{"port 0", []string{"--secure-port", "0"}, "--secure-port 0 must be between 1 and 65535"},
		{"qps", []string{"--kube-api-qps", "0"}, "must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stderr, nil); code != exitUsage {
				t.Errorf("exit = %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"missing kubeconfig": {"--kubeconfig", filepath.Join(dir, "missing"), "--secure-port", strconv.Itoa(freePort(t))},
		"bad key pair":       {"--kubeconfig", kubeconfig, "--secure-port", strconv.Itoa(freePort(t)), "--tls-cert-file", bad, "--tls-private-key-file", bad},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, &stderr, nil); code != exitError {
			t.Errorf("%s: exit = %d, want %d", name, code, exitError)
		}
	}
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs convoy-api with args in the background and returns its address, and a
// function that stops it (as SIGTERM would) and returns its exit status.
func start(t *testing.T, args ...string) (net.Addr, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	codec := make(chan int, 1)
	go func() { codec <- run(ctx, args, os.Stderr, func(a net.Addr) { addrc <- a }) }()
	select {
	case a := <-addrc:
		return a, func() int { cancel(); return <-codec }
	case code := <-codec:
		cancel()
		t.Fatalf("convoy-api exited with %d before listening", code)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("convoy-api did not listen within 30s")
	}
	return nil, nil
}

// TestServe: the binary serves the subresources over HTTPS, as the kubeconfig's admin
// (system:masters) for a direct caller with that admin's credentials; it refuses an
// anonymous caller, answers the probes to anyone, and exits 0 after a shutdown.
func TestServe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api-demo"},
		Spec:       v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"}},
	}
	if err := env.Client.Create(ctx, rel); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, pool := selfSigned(t)
	addr, stop := start(t, "--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(freePort(t)),
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile)
	url := "https://" + addr.String()
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitReady(t, hc, url)
	c := syncapiclient.NewClient(syncapiclient.DirectConfig(admin, url, certFile))
	if err := c.RequestSync(ctx, "default", "api-demo"); err != nil {
		t.Fatalf("RequestSync: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rel), rel); err != nil {
		t.Fatal(err)
	}
	if _, ok := rel.Annotations[v1alpha1.SyncRequestedAtAnnotation]; !ok {
		t.Errorf("annotations = %v, want the sync annotation", rel.Annotations)
	}
	h, err := c.Health(ctx, "default", "api-demo")
	if err != nil || h.Release != "default/api-demo" {
		t.Errorf("Health = %+v, %v", h, err)
	}
	anon := syncapiclient.NewClient(syncapiclient.DirectConfig(rest.AnonymousClientConfig(admin), url, certFile))
	if _, err := anon.Health(ctx, "default", "api-demo"); !apierrors.IsForbidden(err) {
		t.Errorf("anonymous Health = %v, want 403", err)
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		resp, err := hc.Get(url + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", p, resp.StatusCode)
		}
	}
	if resp, err := http.Get("http://" + addr.String() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered 200 on the TLS port")
		}
	}
	if code := stop(); code != exitOK {
		t.Errorf("exit after shutdown = %d, want 0", code)
	}
	if resp, err := hc.Get(url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("still serving after shutdown")
	}
}

// waitReady waits until GET url/readyz answers 200: the informers have synced and the
// client CAs are read.
func waitReady(t *testing.T, hc *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("convoy-api not ready after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key, and returns
// their files and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "convoy-api"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
