package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

var nsCounter atomic.Int32

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// tenant creates a namespace with the Release "app" (and lastAttempted r1) and returns
// the namespace's name.
func tenant(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%100000, nsCounter.Add(1))
	must(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	createRelease(t, ns, "app")
	return ns
}

func createRelease(t *testing.T, ns, name string) {
	t.Helper()
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"}},
	}
	must(t, env.Client.Create(context.Background(), rel))
}

// bind binds subject to the user roles convoy-release-sync and
// convoy-release-health-reader in ns.
func bind(t *testing.T, ns string, subject rbacv1.Subject) {
	t.Helper()
	for _, role := range []string{"convoy-release-sync", "convoy-release-health-reader"} {
		must(t, env.Client.Create(context.Background(), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role + "-" + strings.ToLower(strings.ReplaceAll(subject.Name, ":", "-"))},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		}))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func syncAnnotation(t *testing.T, ns, name string) string {
	t.Helper()
	rel := &v1alpha1.Release{}
	must(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rel))
	return rel.Annotations[v1alpha1.SyncRequestedAtAnnotation]
}

// TestTenantIsolationThroughTheAggregator: a user bound to the subresource roles in
// namespace A syncs and reads the Releases of A through the kube-apiserver, gets 403 in
// namespace B, and a missing Release of A is a NotFound naming it; anonymous requests are
// refused by the kube-apiserver.
func TestTenantIsolationThroughTheAggregator(t *testing.T) {
	t.Parallel()
	a, b := tenant(t, "team-a"), tenant(t, "team-b")
	cfg, err := env.AddUser("alice")
	must(t, err)
	bind(t, a, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"})
	alice := syncapiclient.NewClient(cfg)
	ctx := context.Background()

	eventually(t, 10*time.Second, func() error { return alice.RequestSync(ctx, a, "app") }) // RBAC settles
	if syncAnnotation(t, a, "app") == "" {
		t.Error("POST sync through the kube-apiserver did not set the annotation")
	}
	h, err := alice.Health(ctx, a, "app")
	if err != nil || h.Release != a+"/app" {
		t.Fatalf("Health of %s/app = %+v, %v", a, h, err)
	}
	err = alice.RequestSync(ctx, a, "missing")
	var se *apierrors.StatusError
	if !apierrors.IsNotFound(err) || !asStatus(err, &se) || se.ErrStatus.Details == nil || se.ErrStatus.Details.Name != "missing" {
		t.Errorf("sync of a missing Release = %v, want a NotFound naming it", err)
	}
	if _, err := alice.Health(ctx, a, "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("health of a missing Release = %v, want NotFound", err)
	}

	if err := alice.RequestSync(ctx, b, "app"); !apierrors.IsForbidden(err) {
		t.Errorf("sync in namespace %s = %v, want 403", b, err)
	}
	if _, err := alice.Health(ctx, b, "app"); !apierrors.IsForbidden(err) {
		t.Errorf("health in namespace %s = %v, want 403", b, err)
	}
	if syncAnnotation(t, b, "app") != "" {
		t.Error("a forbidden sync set the annotation")
	}

	anon := syncapiclient.NewClient(rest.AnonymousClientConfig(env.Config))
	if err := anon.RequestSync(ctx, a, "app"); !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
		t.Errorf("anonymous sync = %v, want 401 or 403", err)
	}
}

func asStatus(err error, se **apierrors.StatusError) bool {
	s, ok := err.(*apierrors.StatusError)
	*se = s
	return ok
}

// TestObserverWakeUpThroughTheAggregator: the ServiceAccount convoy-observer, with the
// RBAC of config/rbac, wakes the controller-manager of any namespace through the
// kube-apiserver, as the health loop's Waker does (observer.Options.SyncThroughAPIServer).
func TestObserverWakeUpThroughTheAggregator(t *testing.T) {
	t.Parallel()
	ns := tenant(t, "wake")
	cfg, err := serviceAccountConfig(context.Background(), "convoy-system", "convoy-observer")
	must(t, err)
	waker := syncapiclient.NewClient(cfg)
	eventually(t, 10*time.Second, func() error { return waker.RequestSync(context.Background(), ns, "app") })
	if syncAnnotation(t, ns, "app") == "" {
		t.Error("the observer's wake-up did not set the annotation")
	}
	if _, err := waker.Health(context.Background(), ns, "app"); !apierrors.IsForbidden(err) {
		t.Errorf("the observer read health: %v, want 403 (it may only sync)", err)
	}
}

// direct sends a request to convoy-api's own port with the given client certificate
// (may be nil) and headers.
func direct(t *testing.T, method, path string, cert *tls.Certificate, header map[string]string) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(agg.ServingCA)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	req, err := http.NewRequest(method, apiURL()+path, nil)
	must(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	must(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestDirectRequests: at convoy-api's own port, a forged X-Remote-User is ignored unless
// the client certificate is signed by the front-proxy CA with an allowed name; a bearer
// token's user is authorized with a SubjectAccessReview; the probes need nothing.
func TestDirectRequests(t *testing.T) {
	t.Parallel()
	a, b := tenant(t, "direct-a"), tenant(t, "direct-b")
	forged := map[string]string{"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}
	syncA := syncapi.SyncPath(a, "app")

	if code, body := direct(t, http.MethodPost, syncA, nil, forged); code != http.StatusForbidden && code != http.StatusUnauthorized {
		t.Errorf("forged X-Remote-User without a client certificate = %d %s, want 401/403", code, body)
	}
	// A certificate with the allowed name, but from another CA.
	pemCert, pemKey, err := agg.SignFrontProxyClient("front-proxy-client")
	must(t, err)
	good, err := tls.X509KeyPair(pemCert, pemKey)
	must(t, err)
	other := selfSigned(t, "front-proxy-client")
	if code, body := direct(t, http.MethodPost, syncA, &other, forged); code != http.StatusForbidden && code != http.StatusUnauthorized {
		t.Errorf("forged X-Remote-User with a certificate of another CA = %d %s, want 401/403", code, body)
	}
	// A front-proxy certificate whose name is not allowed.
	pemCert, pemKey, err = agg.SignFrontProxyClient("intruder")
	must(t, err)
	intruder, err := tls.X509KeyPair(pemCert, pemKey)
	must(t, err)
	if code, body := direct(t, http.MethodPost, syncA, &intruder, forged); code != http.StatusForbidden && code != http.StatusUnauthorized {
		t.Errorf("X-Remote-User from a front-proxy certificate with a name not allowed = %d %s, want 401/403", code, body)
	}
	if syncAnnotation(t, a, "app") != "" {
		t.Fatal("a forged request set the sync annotation")
	}
	// The real front proxy (the kube-apiserver's identity) is trusted.
	if code, body := direct(t, http.MethodPost, syncA, &good, forged); code != http.StatusAccepted {
		t.Errorf("X-Remote-User from the front proxy = %d %s, want 202", code, body)
	}

	// A bearer token: TokenReview, then SubjectAccessReview for its user.
	ctx := context.Background()
	cfg, err := serviceAccountConfig(ctx, a, "bob")
	must(t, err)
	bind(t, a, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: a, Name: "bob"})
	bob := &syncapiclient.Client{Config: syncapiclient.DirectConfig(cfg, apiURL(), agg.ServingCAFile)}
	eventually(t, 15*time.Second, func() error { _, err := bob.Health(ctx, a, "app"); return err })
	if err := bob.RequestSync(ctx, a, "app"); err != nil {
		t.Errorf("direct sync with bob's token in %s: %v", a, err)
	}
	if err := bob.RequestSync(ctx, b, "app"); !apierrors.IsForbidden(err) {
		t.Errorf("direct sync with bob's token in %s = %v, want 403", b, err)
	}
	bogus := rest.AnonymousClientConfig(cfg)
	bogus.BearerToken = "not-a-token"
	if err := (&syncapiclient.Client{Config: syncapiclient.DirectConfig(bogus, apiURL(), agg.ServingCAFile)}).RequestSync(ctx, a, "app"); !apierrors.IsUnauthorized(err) {
		t.Errorf("direct sync with a bogus token = %v, want 401", err)
	}

	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if code, body := direct(t, http.MethodGet, p, nil, nil); code != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", p, code, body)
		}
	}
}

// TestRawRequests: what `kubectl get --raw …/health` and `kubectl create --raw …/sync -f -`
// send (a GET, and a POST with whatever body the file holds) works through the
// kube-apiserver; another method on a subresource is 405.
func TestRawRequests(t *testing.T) {
	t.Parallel()
	ns := tenant(t, "raw")
	rc, err := rest.RESTClientFor(rawConfig())
	must(t, err)
	ctx := context.Background()
	body, err := rc.Get().AbsPath(syncapi.HealthPath(ns, "app")).DoRaw(ctx)
	if err != nil || !strings.Contains(string(body), `"release":"`+ns+`/app"`) {
		t.Errorf("GET --raw health = %s, %v", body, err)
	}
	for _, in := range []string{"", "{}\n"} {
		var code int
		body, err = rc.Post().AbsPath(syncapi.SyncPath(ns, "app")).Body([]byte(in)).Do(ctx).StatusCode(&code).Raw()
		if err != nil || code != http.StatusAccepted || !strings.Contains(string(body), `"syncRequestedAt"`) {
			t.Errorf("POST --raw sync with body %q = %d %s, %v", in, code, body, err)
		}
	}
	err = rc.Delete().AbsPath(syncapi.SyncPath(ns, "app")).Do(ctx).Error()
	if !apierrors.IsMethodNotSupported(err) {
		t.Errorf("DELETE sync = %v, want 405", err)
	}
}

// rawConfig is the admin's config for a REST client of absolute paths, as kubectl's
// --raw uses.
func rawConfig() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.APIPath = "/"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}
