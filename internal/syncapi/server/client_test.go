package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
	syncapiserver "github.com/kumodo/convoy-observer/internal/syncapi/server"
)

func TestClientAgainstHandler(t *testing.T) {
	t.Parallel()
	createRelease(t, "client-demo", "r1", nil)
	now := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	srv, _ := newServer(t, func() time.Time { return now })
	c := &syncapiclient.Client{BaseURL: srv.URL + "/"} // a trailing slash is fine
	ctx := context.Background()

	if err := c.RequestSync(ctx, "default", "client-demo"); err != nil {
		t.Fatalf("RequestSync: %v", err)
	}
	if got := getRelease(t, "client-demo").Annotations[v1alpha1.SyncRequestedAtAnnotation]; got != "2026-05-06T07:08:09.000000010Z" {
		t.Errorf("annotation = %q", got)
	}
	now = now.Add(time.Second)
	resp, err := c.Sync(ctx, "default", "client-demo")
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := getRelease(t, "client-demo").Annotations[v1alpha1.SyncRequestedAtAnnotation]; resp.SyncRequestedAt != got || got != "2026-05-06T07:08:10.000000010Z" {
		t.Errorf("Sync answered %+v, the annotation is %q: want the annotation it wrote", resp, got)
	}

	h, err := c.Health(ctx, "default", "client-demo")
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	if h.Release != "default/client-demo" || !h.RenderCurrent || len(h.Entries) != 0 || h.Summary.Total != 0 {
		t.Errorf("Health = %+v", h)
	}

	err = c.RequestSync(ctx, "default", "client-missing")
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsNotFound(err) {
		t.Fatalf("RequestSync of a missing release = %#v, want a NotFound StatusError", err)
	}
	if d := se.ErrStatus.Details; d == nil || d.Name != "client-missing" || d.Group != v1alpha1.GroupVersion.Group || d.Kind != "releases" {
		t.Errorf("details = %+v, want the Release client-missing", d)
	}
	mustContain(t, "error", err.Error(), "release default/client-missing not found")
	if _, err := c.Health(ctx, "default", "client-missing"); !apierrors.IsNotFound(err) {
		t.Errorf("Health of a missing release = %v, want NotFound", err)
	}
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	var gotPath, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth = r.URL.EscapedPath(), r.Header.Get("Authorization")
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	}))
	defer srv.Close()
	c := &syncapiclient.Client{Config: &rest.Config{BearerToken: "t0ken"}, BaseURL: srv.URL, HTTP: srv.Client()}

	err := c.RequestSync(context.Background(), "my-ns", "a.b")
	if !apierrors.IsInternalError(err) {
		t.Fatalf("RequestSync against a 500 = %v, want an InternalError StatusError", err)
	}
	mustContain(t, "error", err.Error(), "upstream exploded")
	if want := syncapi.PathPrefix + "/namespaces/my-ns/releases/a.b/sync"; gotPath != want {
		t.Errorf("path = %q, want %q", gotPath, want)
	}
	if _, err := c.Health(context.Background(), "default", "x"); !apierrors.IsInternalError(err) {
		t.Errorf("Health against a 500 = %v", err)
	}
	// A direct URL carries the caller's credentials like any other call.
	direct := &syncapiclient.Client{Config: syncapiclient.DirectConfig(&rest.Config{Host: "https://kube.example", BearerToken: "t0ken",
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte("cluster CA")}}, srv.URL, "")}
	_ = direct.RequestSync(context.Background(), "default", "x")
	if gotAuth != "Bearer t0ken" {
		t.Errorf("Authorization of a direct request = %q, want the bearer token", gotAuth)
	}
	if err := c.RequestSync(context.Background(), "default", "a/b"); err == nil || !strings.Contains(err.Error(), "a/b") {
		t.Errorf("RequestSync of an invalid name = %v, want an error naming it", err)
	}

	srv.Close()
	if err := c.RequestSync(context.Background(), "default", "x"); err == nil || apierrors.ReasonForError(err) != metav1.StatusReasonUnknown {
		t.Errorf("RequestSync against a closed server = %v, want a transport error", err)
	}
	if err := (&syncapiclient.Client{}).RequestSync(context.Background(), "default", "x"); err == nil {
		t.Error("a Client without an address sent a request")
	}
}

// TestSyncOfAnAnswerWithoutTheTime: a request that succeeded is no error, whatever its
// body: an older convoy-api, or a proxy, may answer without the annotation it wrote.
func TestSyncOfAnAnswerWithoutTheTime(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"", "accepted", `{"release":"default/x"}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(body))
		}))
		c := &syncapiclient.Client{Config: &rest.Config{}, BaseURL: srv.URL, HTTP: srv.Client()}
		resp, err := c.Sync(context.Background(), "default", "x")
		srv.Close()
		if err != nil || resp == nil || resp.SyncRequestedAt != "" || resp.Release != "default/x" {
			t.Errorf("Sync answered with %q = %+v, %v; want the Release and no time, no error", body, resp, err)
		}
	}
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	lines := make(chan string, 4)
	h := syncapiserver.NewEndpoints(env.Client)
	h.Log = funcr.New(func(_, args string) { lines <- args }, funcr.Options{})
	srv := serve(t, h)

	do(t, http.MethodGet, srv.URL+syncapi.HealthPath("default", "log-missing"))
	select {
	case line := <-lines:
		for _, want := range []string{`"subresource"="health"`, `"status"=404`, `"release"="default/log-missing"`} {
			mustContain(t, "log line", line, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no request logged")
	}
}
