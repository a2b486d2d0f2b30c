package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kumodo/convoy-observer/hack/chart"
	"github.com/kumodo/convoy-observer/internal/localcluster"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// installManager is the field manager of what --install applies (as kubectl apply would).
const installManager = "convoy-install"

// auditPolicy logs every request of the install's ServiceAccounts (metadata only: user,
// verb, resource, namespace, name, response code); test/install reads it.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:%s"]
  - level: None
`

// installed is the install of config/default (or of the Helm chart), rendered.
type installed struct {
	source string // config/default, or the chart
	objs   []*unstructured.Unstructured
	// namespace of the install; args of the containers of the Deployments by name.
	namespace string
	args      map[string][]string
}

// renderInstall renders config/default as `kubectl kustomize config/default` does, or,
// fromChart, the Helm chart as `helm template --set namespace.create=true` does in
// config/default's namespace (the same objects: hack/chart's tests).
func renderInstall(root string, fromChart bool) (*installed, error) {
	in := &installed{source: "config/default", args: map[string][]string{}}
	var objs []*unstructured.Unstructured
	var err error
	if fromChart {
		in.source = "the Helm chart " + chart.Dir
		var maps []map[string]any
		maps, err = chart.Render(filepath.Join(root, chart.Dir), map[string]any{"namespace": map[string]any{"create": true}}, chart.Namespace)
		for _, m := range maps {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	} else {
		objs, err = testenv.RenderDefault(root)
	}
	if err != nil {
		return nil, err
	}
	for _, u := range objs {
		in.objs = append(in.objs, u)
		switch u.GetKind() {
		case "Namespace":
			in.namespace = u.GetName()
		case "Deployment":
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if len(cs) != 1 {
				return nil, fmt.Errorf("Deployment %s has %d containers, want 1", u.GetName(), len(cs))
			}
			args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
			in.args[u.GetName()] = args
		}
	}
	for _, d := range []string{"convoy-observer", "convoy-api"} {
		if _, ok := in.args[d]; !ok {
			return nil, fmt.Errorf("%s has no Deployment %s", in.source, d)
		}
	}
	if in.namespace == "" {
		return nil, fmt.Errorf("%s has no Namespace", in.source)
	}
	return in, nil
}

// startInstalled applies config/default to the cluster c and runs convoy-api and
// convoy-observer from binDir as it ships them: with the tokens of its ServiceAccounts
// (TokenRequest) in a kubeconfig that holds only the token and the cluster's CA, with
// the arguments of its Deployments (plus what a process outside a pod needs: the
// kubeconfig, addresses on 127.0.0.1, and the observer's metrics turned on, as
// docs/operations.md says), behind its APIService. What cert-manager would do, the demo
// does: the Secret convoy-api-tls from the serving pair of agg, and the APIService's
// caBundle. The Deployments themselves are not applied (the processes stand in for their
// pods), and the Service convoy-api is an ExternalName of a loopback address (a local
// cluster has no Service proxy), where convoy-api listens on the Service's port 443
// (another port, and the APIService pointed at it, when not running as root).
func startInstalled(ctx context.Context, in *installed, binDir string, c *localcluster.Cluster, agg *testenv.Aggregation, logDir string, logf func(string, ...any)) (_ *components, err error) {
	comps := &components{}
	defer func() {
		if err != nil {
			comps.Stop()
		}
	}()
	// A random loopback address: parallel runs do not collide on port 443.
	host := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), 1+rand.IntN(250), 1+rand.IntN(250))
	port := 443
	if os.Geteuid() != 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
		logf("not root: convoy-api listens on port %d and the APIService points there instead of 443", port)
	}
	ca, err := os.ReadFile(agg.ServingCAFile)
	if err != nil {
		return nil, err
	}
	crt, err := os.ReadFile(agg.ServingCertFile)
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(agg.ServingKeyFile)
	if err != nil {
		return nil, err
	}
	skipped := []string{}
	for _, u := range in.objs {
		switch u.GetKind() {
		case "Issuer", "Certificate":
			skipped = append(skipped, u.GetKind()+"/"+u.GetName())
			continue
		case "Deployment":
			continue
		case "Service":
			if u.GetName() == testenv.APIServiceSvc {
				_ = unstructured.SetNestedField(u.Object, "ExternalName", "spec", "type")
				_ = unstructured.SetNestedField(u.Object, host, "spec", "externalName")
				unstructured.RemoveNestedField(u.Object, "spec", "selector")
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "https", "port": int64(443), "protocol": "TCP"}}, "spec", "ports")
			}
		case "APIService":
			// cert-manager's CA injector fills caBundle from the Certificate.
			anns := u.GetAnnotations()
			delete(anns, "cert-manager.io/inject-ca-from")
			u.SetAnnotations(anns)
			_ = unstructured.SetNestedField(u.Object, base64.StdEncoding.EncodeToString(ca), "spec", "caBundle")
			if port != 443 {
				_ = unstructured.SetNestedField(u.Object, int64(port), "spec", "service", "port")
			}
		}
		if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(installManager), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying %s %s of config/default: %w", u.GetKind(), u.GetName(), err)
		}
	}
	// The Secret that cert-manager would issue for the Certificate convoy-api-serving.
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "convoy-api-tls", Namespace: in.namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca},
	}
	if err := c.Client.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("creating the Secret convoy-api-tls: %w", err)
	}
	logf("config/default applied to namespace %s (not applied: the Deployments, run below as processes; %s, played by the demo)", in.namespace, strings.Join(skipped, ", "))

	kc, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	kubeconfig := func(sa string) (string, error) {
		exp := int64(3600)
		tr, err := kc.CoreV1().ServiceAccounts(in.namespace).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("TokenRequest for ServiceAccount %s/%s: %w", in.namespace, sa, err)
		}
		return writeTokenKubeconfig(filepath.Join(logDir, "..", "pki", sa+".kubeconfig"), c.Config, sa, tr.Status.Token)
	}
	apiKubeconfig, err := kubeconfig("convoy-api")
	if err != nil {
		return nil, err
	}
	apiArgs := []string{"--kubeconfig=" + apiKubeconfig, "--bind-address=" + host, "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + agg.ServingCertFile, "--tls-private-key-file=" + agg.ServingKeyFile}
	apiArgs = append(apiArgs, without(in.args["convoy-api"], "--secure-port", "--bind-address", "--tls-cert-file", "--tls-private-key-file")...)
	comps.API, err = localcluster.StartProcess(ctx, "convoy-api", filepath.Join(binDir, "convoy-api"), apiArgs, filepath.Join(logDir, "convoy-api.log"))
	if err != nil {
		return nil, err
	}
	comps.APIURL = "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}}}
	if err := waitHTTP(ctx, hc, comps.API, comps.APIURL+"/readyz"); err != nil {
		return nil, err
	}
	if err := waitAPIServiceAvailable(ctx, c.Client); err != nil {
		return nil, fmt.Errorf("%w; the end of %s:\n%s", err, comps.API.LogPath, comps.API.LogTail(15))
	}

	obsKubeconfig, err := kubeconfig("convoy-observer")
	if err != nil {
		return nil, err
	}
	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	probeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(probePort))
	comps.MetricsURL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort)) + "/metrics"
	obsArgs := []string{"--kubeconfig=" + obsKubeconfig, "--health-probe-bind-address=" + probeAddr,
		"--metrics-bind-address=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort))}
	for _, a := range without(in.args["convoy-observer"], "--health-probe-bind-address", "--metrics-bind-address") {
		obsArgs = append(obsArgs, strings.ReplaceAll(a, "$(POD_NAMESPACE)", in.namespace))
	}
	comps.Observer, err = localcluster.StartProcess(ctx, "convoy-observer", filepath.Join(binDir, "convoy-observer"), obsArgs, filepath.Join(logDir, "convoy-observer.log"))
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, &http.Client{Timeout: 2 * time.Second}, comps.Observer, "http://"+probeAddr+"/readyz"); err != nil {
		return nil, err
	}
	comps.apiClient = hc
	return comps, nil
}

// without returns args less those of the named flags ("--name=value" or "--name").
func without(args []string, flags ...string) []string {
	var out []string
next:
	for _, a := range args {
		for _, f := range flags {
			if a == f || strings.HasPrefix(a, f+"=") {
				continue next
			}
		}
		out = append(out, a)
	}
	return out
}

// writeTokenKubeconfig writes a kubeconfig that holds only the server, its CA and the
// token: the identity of a pod of the ServiceAccount sa, nothing else.
func writeTokenKubeconfig(path string, admin *rest.Config, sa, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "local", AuthInfo: sa}
	cfg.CurrentContext = sa
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, clientcmd.WriteToFile(*cfg, path)
}

// waitAPIServiceAvailable waits until the APIService of convoy-api is Available.
func waitAPIServiceAvailable(ctx context.Context, c client.Client) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, componentReadyTimeout, true, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiregistration.k8s.io/v1")
		u.SetKind("APIService")
		if err := c.Get(ctx, client.ObjectKey{Name: testenv.APIServiceName}, u); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // polled again until the timeout; the last error is reported
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cd := range conds {
			m, _ := cd.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("Available=%v (%v): %v", m["status"], m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the APIService %s is not Available: %s", testenv.APIServiceName, last)
	}
	return nil
}

// scrapeMetrics writes the /metrics of the observer and of convoy-api (read as the
// cluster's admin, as Prometheus would with its own token) to dir.
func scrapeMetrics(ctx context.Context, comps *components, c *localcluster.Cluster, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(c.Config.CertData, c.Config.KeyData)
	if err != nil {
		return fmt.Errorf("the admin's client certificate: %w", err)
	}
	tr := comps.apiClient.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	for _, s := range []struct {
		file, url string
		hc        *http.Client
	}{
		{"convoy-observer.metrics", comps.MetricsURL, &http.Client{Timeout: 10 * time.Second}},
		{"convoy-api.metrics", comps.APIURL + "/metrics", &http.Client{Timeout: 10 * time.Second, Transport: tr}},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
		if err != nil {
			return err
		}
		resp, err := s.hc.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", s.url, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", s.url, resp.Status, body)
		}
		if err := os.WriteFile(filepath.Join(dir, s.file), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeAuditPolicy writes the audit policy for the install's namespace and returns the
// kube-apiserver flags that log to logPath with it.
func writeAuditPolicy(dir, namespace, logPath string) (map[string]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, fmt.Appendf(nil, auditPolicy, namespace), 0o600); err != nil {
		return nil, err
	}
	return map[string]string{"audit-policy-file": policy, "audit-log-path": logPath, "audit-log-format": "json", "audit-log-maxsize": "0"}, nil
}
