package subresources_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/subresources"
)

func TestClientAgainstHandler(t *testing.T) {
	t.Parallel()
	createRelease(t, "client-demo", "r1", nil)
	now := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	srv, _ := newServer(t, func() time.Time { return now })
	c := &subresources.Client{BaseURL: srv.URL + "/"} // a trailing slash is fine
	ctx := context.Background()

	if err := c.RequestSync(ctx, "default", "client-demo"); err != nil {
		t.Fatalf("RequestSync: %v", err)
	}
	if got := getRelease(t, "client-demo").Annotations[v1alpha1.SyncRequestedAtAnnotation]; got != "2026-05-06T07:08:09.000000010Z" {
		t.Errorf("annotation = %q", got)
	}

	h, err := c.Health(ctx, "default", "client-demo")
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	if h.Release != "default/client-demo" || !h.RenderCurrent || len(h.Entries) != 0 || h.Summary.Total != 0 {
		t.Errorf("Health = %+v", h)
	}

	err = c.RequestSync(ctx, "default", "client-missing")
	var he *subresources.HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
		t.Fatalf("RequestSync of a missing release = %v, want an HTTPError 404", err)
	}
	mustContain(t, "error", err.Error(), "404 Not Found: release default/client-missing not found")
	if _, err := c.Health(ctx, "default", "client-missing"); !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
		t.Errorf("Health of a missing release = %v, want an HTTPError 404", err)
	}
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	var gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.EscapedPath()
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	}))
	defer srv.Close()
	c := &subresources.Client{BaseURL: srv.URL, HTTP: srv.Client()}

	err := c.RequestSync(context.Background(), "my ns", "a/b")
	if err == nil {
		t.Fatal("RequestSync against a 500 succeeded")
	}
	for _, want := range []string{"POST", "500 Internal Server Error", "upstream exploded"} {
		mustContain(t, "error", err.Error(), want)
	}
	if want := subresources.PathPrefix + "/namespaces/my%20ns/releases/a%2Fb/sync"; gotPath != want {
		t.Errorf("path = %q, want %q", gotPath, want)
	}
	if _, err := c.Health(context.Background(), "default", "x"); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("Health against a 500 = %v", err)
	}

	srv.Close()
	if err := c.RequestSync(context.Background(), "default", "x"); err == nil {
		t.Error("RequestSync against a closed server succeeded")
	}
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	lines := make(chan string, 4)
	h := subresources.NewHandler(env.Client)
	h.Log = funcr.New(func(_, args string) { lines <- args }, funcr.Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	do(t, http.MethodGet, srv.URL+subresources.HealthPath("default", "log-missing"))
	select {
	case line := <-lines:
		for _, want := range []string{`"method"="GET"`, `"path"="` + subresources.HealthPath("default", "log-missing") + `"`, `"status"=404`, `"release"="default/log-missing"`} {
			mustContain(t, "log line", line, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no request logged")
	}
}
