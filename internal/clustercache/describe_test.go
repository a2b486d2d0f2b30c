package clustercache

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kumodo/convoy-observer/internal/testenv"
)

// leak is what a server that a tenant's kubeconfig points at puts into its answers: no
// description of a read error may show it.
const leak = "SECRET-of-the-server"

// TestDescribeErrorShowsNoServerText: a target's error reaches a message as its HTTP
// code and a Kubernetes reason, or as a fixed class of transport failure; text that the
// server chose (a body, a Status message, a made-up reason, a certificate's names, the
// first bytes of a non-HTTP answer) never does. Errors in the cache's own words keep
// them.
func TestDescribeErrorShowsNoServerText(t *testing.T) {
	t.Parallel()
	gr := schema.GroupResource{Resource: "configmaps"}
	status := func(code int32, reason metav1.StatusReason) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: leak,
			Details: &metav1.StatusDetails{Name: leak, Causes: []metav1.StatusCause{{Message: leak}}}}}
	}
	onURL := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://10.0.0.1/api/v1/namespaces/a/configmaps/b", Err: err}
	}
	refused := onURL(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	malformed := onURL(fmt.Errorf("net/http: HTTP/1.x transport connection broken: malformed HTTP response %q", leak))
	badCert := onURL(&tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{DNSNames: []string{leak}}, Host: "10.0.0.1"}})
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"a 500 with a body", apierrors.NewGenericServerResponse(500, "get", gr, "b", "<html>"+leak+"</html>", 0, true), "500 InternalError"},
		{"a 503 with a body", apierrors.NewGenericServerResponse(503, "get", gr, "b", leak, 0, true), "503 ServiceUnavailable"},
		{"a 403 Status", status(403, metav1.StatusReasonForbidden), "403 Forbidden"},
		{"a 401 Status", status(401, metav1.StatusReasonUnauthorized), "401 Unauthorized"},
		{"a wrapped 500 Status", fmt.Errorf("reading: %w", status(500, metav1.StatusReasonInternalError)), "500 InternalError"},
		{"a made-up reason", status(418, metav1.StatusReason(leak)), "418"},
		{"a made-up code", status(7000, metav1.StatusReasonForbidden), "Forbidden"},
		{"neither", status(0, ""), "an error answer"},
		{"connection refused", refused, "connection refused"},
		{"a timeout", onURL(context.DeadlineExceeded), "timeout"},
		{"a certificate of other names", badCert, "TLS error"},
		{"plain HTTP to an HTTPS client", onURL(http.ErrSchemeMismatch), "TLS error"},
		{"a host that does not resolve", onURL(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: leak, IsNotFound: true}}), "host not found"},
		{"an answer that is not HTTP", malformed, "connection failed"},
		{"an answer that does not decode", runtime.NewMissingKindErr(`{"` + leak + `":1}`), "undecodable answer"},
		{"anything else", errors.New(leak), "unexpected error"},
		{"the server answers, but not for this object", fmt.Errorf("the server answers, but not for this object: %w", onURL(context.DeadlineExceeded)), "timeout"},
		{"not connected, with the transport's error", fmt.Errorf("%w: Cluster ns/c: %w", ErrClusterNotConnected, refused), "cluster not connected: Cluster ns/c: connection refused"},
		{"held down after a non-HTTP answer", fmt.Errorf("%w: Cluster ns/c did not answer (not retried before 2026-01-01T00:00:00Z): %w", ErrClusterNotConnected, malformed),
			"cluster not connected: Cluster ns/c did not answer (not retried before 2026-01-01T00:00:00Z): connection failed"},
		{"not connected, in the cache's own words", fmt.Errorf("%w: Secret ns/kc of Cluster c has no key %q", ErrClusterNotConnected, "value"), `cluster not connected: Secret ns/kc of Cluster c has no key "value"`},
		{"not connected, the target's part not at the end", fmt.Errorf("%w: %w (and then some)", ErrClusterNotConnected, malformed), "cluster not connected: connection failed"},
	}
	for _, c := range cases {
		got := DescribeError(c.err)
		if got != c.want || strings.Contains(got, leak) {
			t.Errorf("%s: DescribeError = %q, want %q", c.name, got, c.want)
		}
	}
	if got := DescribeError(nil); got != "" {
		t.Errorf("DescribeError(nil) = %q", got)
	}
}

// TestDescribeErrorOfRealAnswers: the errors that client-go makes of what a server that
// is no Kubernetes API server answers are described without its text, read through the
// cache's own reader.
func TestDescribeErrorOfRealAnswers(t *testing.T) {
	t.Parallel()
	srv := testenv.NotKubernetes(t, leak)
	reader, err := New(Options{Local: &rest.Config{Host: srv.URL}, HoldDown: time.Millisecond}).GetReader(context.Background(), localCluster("fake"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"body500": "500 InternalError", "status403": "403 Forbidden: system:serviceaccount:ns:convoy-health-reader may not get configmaps in namespace ns; grant it: kubectl create rolebinding convoy-health-reader --clusterrole=convoy-health-reader --serviceaccount=ns:convoy-health-reader -n ns", "body503": "503 ServiceUnavailable",
		"reason418": "418", "garbage200": "undecodable answer",
	} {
		_, err := reader.Get(context.Background(), gvrConfigMaps, "ns", name)
		if got := DescribeError(err); got != want {
			t.Errorf("%s: DescribeError(%v) = %q, want %q", name, err, got, want)
		}
	}

	// A server that is not HTTP at all: its banner is in client-go's error.
	banner, err := New(Options{Local: &rest.Config{Host: testenv.NotHTTP(t, leak)}}).GetReader(context.Background(), localCluster("banner"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = banner.Get(context.Background(), gvrConfigMaps, "ns", "a")
	if !errors.Is(err, ErrClusterNotConnected) || !strings.Contains(err.Error(), leak) {
		t.Fatalf("precondition: a non-HTTP answer is %v; want a not-connected error quoting the banner", err)
	}
	if got := DescribeError(err); !strings.HasPrefix(got, "cluster not connected: Cluster ns/banner") || !strings.HasSuffix(got, ": connection failed") || strings.Contains(got, leak) {
		t.Fatalf("DescribeError(%v) = %q", err, got)
	}
}
