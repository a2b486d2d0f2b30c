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
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/subresources"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

var (
	env        *testenv.Env
	kubeconfig string // an admin kubeconfig file for env
)

func TestMain(m *testing.M) {
	env = testenv.MustStart()
	code := func() int {
		defer env.Stop()
		data, err := env.AdminKubeconfig()
		if err != nil {
			panic(err)
		}
		dir, err := os.MkdirTemp("", "convoy-api-test")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
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
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"argument", []string{"serve"}, `unexpected argument "serve"`},
		{"bad address", []string{"--bind-address", "8090"}, "invalid --bind-address"},
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

func TestStartErrors(t *testing.T) { // not parallel: Setenv
	if _, err := loadConfig(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("loadConfig of a missing file succeeded")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	if _, err := loadConfig(""); err == nil || !strings.Contains(err.Error(), "in-cluster") {
		t.Errorf("loadConfig without a kubeconfig outside a cluster = %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1:0", "--tls-cert-file", bad, "--tls-private-key-file", bad}
	if code := run(context.Background(), args, &bytes.Buffer{}, nil); code != exitError {
		t.Errorf("exit with a bad key pair = %d, want %d", code, exitError)
	}
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

func TestServeHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api-demo"},
		Spec:       v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"}},
	}
	if err := env.Client.Create(ctx, rel); err != nil {
		t.Fatal(err)
	}
	addr, stop := start(t, "--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1:0")
	c := &subresources.Client{BaseURL: "http://" + addr.String()}
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
	if code := stop(); code != exitOK {
		t.Errorf("exit after shutdown = %d, want 0", code)
	}
	if _, err := http.Get("http://" + addr.String() + subresources.HealthzPath); err == nil {
		t.Error("still serving after shutdown")
	}
}

func TestServeHTTPS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t)
	addr, stop := start(t, "--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1:0",
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile)
	defer stop()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + addr.String() + subresources.HealthzPath)
	if err != nil {
		t.Fatalf("GET healthz over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz = %d", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + addr.String() + subresources.HealthzPath); err == nil && resp.StatusCode == http.StatusOK {
		t.Error("plain HTTP answered 200 on the TLS port")
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
