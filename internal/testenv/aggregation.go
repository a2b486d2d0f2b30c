package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names under which RegisterAPIService puts convoy-api behind the kube-apiserver, as in
// config/api: the APIService, and the Service it names.
const (
	APIServiceName   = "v1alpha1.subresources.convoy.kumodo.io"
	APIServiceNS     = "convoy-system"
	APIServiceSvc    = "convoy-api"
	FrontProxyClient = "front-proxy-client"
)

// Aggregation is the PKI of an aggregated API server in tests and the demo, written to
// Dir: the front-proxy CA, which signs the client certificate that the kube-apiserver
// presents when it proxies a request (and whose CN convoy-api accepts as the only
// request-header client), and a serving CA, which signs convoy-api's serving
// certificate for <svc>.<ns>.svc (what the kube-apiserver verifies, with the
// APIService's caBundle) and localhost.
type Aggregation struct {
	Dir string
	// FrontProxyCAFile signs ProxyClientCertFile (CN FrontProxyClient).
	FrontProxyCAFile, ProxyClientCertFile, ProxyClientKeyFile string
	// ServingCA (PEM, also in ServingCAFile) signs ServingCertFile.
	ServingCA                       []byte
	ServingCAFile                   string
	ServingCertFile, ServingKeyFile string

	frontProxy, serving *authority
	serial              atomic.Int64
}

// authority is a CA's certificate and key.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewAggregation creates the CAs and certificates in dir (which must exist).
func NewAggregation(dir string) (*Aggregation, error) {
	a := &Aggregation{Dir: dir}
	var err error
	if a.frontProxy, err = a.newCA("front-proxy-ca", filepath.Join(dir, "front-proxy-ca.crt")); err != nil {
		return nil, err
	}
	a.FrontProxyCAFile = filepath.Join(dir, "front-proxy-ca.crt")
	if a.serving, err = a.newCA("convoy-api-ca", filepath.Join(dir, "serving-ca.crt")); err != nil {
		return nil, err
	}
	a.ServingCAFile = filepath.Join(dir, "serving-ca.crt")
	if a.ServingCA, err = os.ReadFile(a.ServingCAFile); err != nil {
		return nil, err
	}
	a.ProxyClientCertFile, a.ProxyClientKeyFile = filepath.Join(dir, "proxy-client.crt"), filepath.Join(dir, "proxy-client.key")
	cert, key, err := a.SignFrontProxyClient(FrontProxyClient)
	if err != nil {
		return nil, err
	}
	if err := writeFiles(a.ProxyClientCertFile, cert, a.ProxyClientKeyFile, key); err != nil {
		return nil, err
	}
	a.ServingCertFile, a.ServingKeyFile = filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	return a, a.RenewServingCert()
}

// APIServerArgs are the kube-apiserver flags of the aggregation layer: the
// request-header (front-proxy) settings and the proxy client certificate.
func (a *Aggregation) APIServerArgs() map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       a.FrontProxyCAFile,
		"requestheader-allowed-names":        FrontProxyClient,
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-uid-headers":          "X-Remote-Uid",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             a.ProxyClientCertFile,
		"proxy-client-key-file":              a.ProxyClientKeyFile,
	}
}

// SignFrontProxyClient returns a PEM client certificate and key with CN cn signed by the
// front-proxy CA (tests: a client that may set X-Remote-User when cn is allowed).
func (a *Aggregation) SignFrontProxyClient(cn string) (certPEM, keyPEM []byte, err error) {
	return a.sign(a.frontProxy, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// RenewServingCert writes a new serving key pair signed by the serving CA (each call a
// new serial and key), replacing the files atomically.
func (a *Aggregation) RenewServingCert() error {
	cert, key, err := a.sign(a.serving, &x509.Certificate{
		Subject:     pkix.Name{CommonName: APIServiceSvc},
		DNSNames:    []string{APIServiceSvc + "." + APIServiceNS + ".svc", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return err
	}
	return writeFiles(a.ServingCertFile, cert, a.ServingKeyFile, key)
}

func (a *Aggregation) newCA(cn, certFile string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(a.serial.Add(1)),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

func (a *Aggregation) sign(ca *authority, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = big.NewInt(a.serial.Add(1) + time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writeFiles writes both files through temporary files and renames, so that a reader
// never sees half a pair.
func writeFiles(certFile string, cert []byte, keyFile string, key []byte) error {
	for _, f := range []struct {
		path string
		data []byte
	}{{keyFile, key}, {certFile, cert}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return err
		}
	}
	return nil
}

// RegisterAPIService puts convoy-api, listening on localhost:port, behind the
// kube-apiserver of c: the namespace APIServiceNS, the Service APIServiceSvc (type
// ExternalName localhost, since a test cluster has no Service proxy and Endpoints may not
// name a loopback address) and the APIService APIServiceName with the serving CA as
// caBundle. It waits until the APIService is Available.
func (a *Aggregation) RegisterAPIService(ctx context.Context, c client.Client, port int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: APIServiceNS}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", APIServiceNS, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: APIServiceNS, Name: APIServiceSvc},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(port)}},
		},
	}
	if err := c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Service %s/%s: %w", APIServiceNS, APIServiceSvc, err)
	}
	as := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": APIServiceName},
		"spec": map[string]any{
			"group": "subresources.convoy.kumodo.io", "version": "v1alpha1",
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"caBundle": a.ServingCA,
			"service":  map[string]any{"namespace": APIServiceNS, "name": APIServiceSvc, "port": int64(port)},
		},
	}}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(as), client.FieldOwner("convoy-test"), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying APIService %s: %w", APIServiceName, err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetAPIVersion("apiregistration.k8s.io/v1")
		got.SetKind("APIService")
		if err := c.Get(ctx, client.ObjectKey{Name: APIServiceName}, got); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // polled again until the timeout; the last error is reported
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available: %s: %w", APIServiceName, last, err)
	}
	return nil
}
