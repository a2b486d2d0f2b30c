package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiserver "github.com/kumodo/convoy-observer/internal/syncapi/server"
)

func TestSyncSetsAnnotation(t *testing.T) {
	t.Parallel()
	before := createRelease(t, "sync-demo", "r1", map[string]string{"team": "payments"})
	now := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))
	srv, _ := newServer(t, func() time.Time { return now })
	url := srv.URL + syncapi.SyncPath("default", "sync-demo")

	code, _, body := do(t, http.MethodPost, url)
	if code != http.StatusAccepted {
		t.Fatalf("POST sync = %d %s, want 202", code, body)
	}
	var resp syncapi.SyncResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	if resp.Release != "default/sync-demo" || resp.SyncRequestedAt != "2026-03-04T04:06:07.123456789Z" {
		t.Errorf("response = %+v", resp)
	}

	after := getRelease(t, "sync-demo")
	got, err := time.Parse(time.RFC3339Nano, after.Annotations[v1alpha1.SyncRequestedAtAnnotation])
	if err != nil {
		t.Fatalf("annotation: %v", err)
	}
	if !got.Equal(now) {
		t.Errorf("annotation = %s, want %s", got, now)
	}
	if after.Annotations["team"] != "payments" || len(after.Annotations) != 2 {
		t.Errorf("annotations = %v, want team kept and the sync annotation added", after.Annotations)
	}
	if !equality.Semantic.DeepEqual(after.Spec, before.Spec) {
		t.Errorf("spec changed: %+v, was %+v", after.Spec, before.Spec)
	}
	if after.GetLastAttemptedRenderRef() != "r1" {
		t.Errorf("status changed: %+v", after.Status)
	}

	now = now.Add(90 * time.Second)
	if code, _, body := do(t, http.MethodPost, url); code != http.StatusAccepted {
		t.Fatalf("second POST sync = %d %s, want 202", code, body)
	}
	second := getRelease(t, "sync-demo")
	if want := "2026-03-04T04:07:37.123456789Z"; second.Annotations[v1alpha1.SyncRequestedAtAnnotation] != want {
		t.Errorf("annotation after the second POST = %q, want %q", second.Annotations[v1alpha1.SyncRequestedAtAnnotation], want)
	}

	// A whole second still carries nine digits of nanoseconds.
	now = time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	if code, _, body := do(t, http.MethodPost, url); code != http.StatusAccepted {
		t.Fatalf("third POST sync = %d %s, want 202", code, body)
	}
	if want, got := "2026-03-04T05:00:00.000000000Z", getRelease(t, "sync-demo").Annotations[v1alpha1.SyncRequestedAtAnnotation]; got != want {
		t.Errorf("annotation at a whole second = %q, want %q", got, want)
	}
}

func TestSyncErrors(t *testing.T) {
	t.Parallel()
	createRelease(t, "sync-errors", "", nil)
	srv, _ := newServer(t, nil)

	t.Run("missing release", func(t *testing.T) {
		code, hdr, body := do(t, http.MethodPost, srv.URL+syncapi.SyncPath("default", "no-such-release"))
		if code != http.StatusNotFound {
			t.Fatalf("status = %d %s, want 404", code, body)
		}
		mustContain(t, "Content-Type", hdr.Get("Content-Type"), "application/json")
		st := decodeStatus(t, body)
		mustContain(t, "message", st.Message, "default/no-such-release")
		if st.Reason != "NotFound" || st.Details == nil || st.Details.Name != "no-such-release" {
			t.Errorf("status = %+v", st)
		}
	})
	t.Run("GET on sync", func(t *testing.T) {
		code, _, body := do(t, http.MethodGet, srv.URL+syncapi.SyncPath("default", "sync-errors"))
		if code != http.StatusMethodNotAllowed {
			t.Fatalf("status = %d (%s), want 405", code, body)
		}
		if _, ok := getRelease(t, "sync-errors").Annotations[v1alpha1.SyncRequestedAtAnnotation]; ok {
			t.Error("GET set the sync annotation")
		}
	})
	t.Run("API error", func(t *testing.T) {
		ww, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		failing := interceptor.NewClient(ww, interceptor.Funcs{
			Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return errors.New("etcd is on fire")
			},
		})
		h := syncapiserver.NewEndpoints(failing)
		h.Log = logr.Discard()
		srv := serve(t, h)
		code, _, body := do(t, http.MethodPost, srv.URL+syncapi.SyncPath("default", "sync-errors"))
		if code != http.StatusInternalServerError {
			t.Fatalf("status = %d %s, want 500", code, body)
		}
		mustContain(t, "message", decodeStatus(t, body).Message, "etcd is on fire")
	})
}
