package healthloop

import (
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// TestReleaseGone: only a NotFound Status that names the Release drops the edge, from a
// direct --sync-url or through the kube-apiserver (both an APIStatus).
func TestReleaseGone(t *testing.T) {
	t.Parallel()
	releases := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "releases"}
	status := func(code int32, st metav1.Status) error {
		st.Code = code
		return fmt.Errorf("waking: %w", &apierrors.StatusError{ErrStatus: st})
	}
	gone := apierrors.NewNotFound(releases, "app").Status()
	other := apierrors.NewNotFound(releases, "other").Status()
	noRoute := metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource /wrong/apis/..."}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"convoy-api: release not found", status(404, gone), true},
		{"convoy-api: another release", status(404, other), false},
		{"convoy-api: no such path", status(404, noRoute), false},
		{"Status body on a 500", status(500, gone), false},
		{"another kind named app", status(404, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "app").Status()), false},
		{"kube-apiserver: release not found", fmt.Errorf("waking: %w", apierrors.NewNotFound(releases, "app")), true},
		{"kube-apiserver: unknown path", apierrors.NewNotFound(schema.GroupResource{}, ""), false},
		{"client-go made the Status up", apierrors.NewGenericServerResponse(404, "post", releases, "app", "404 page not found", 0, true), false},
		{"kube-apiserver: conflict", apierrors.NewConflict(releases, "app", errors.New("x")), false},
		{"connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
	}
	for _, c := range cases {
		if got := releaseGone(c.err, "app"); got != c.want {
			t.Errorf("%s: releaseGone = %v, want %v (%v)", c.name, got, c.want, c.err)
		}
	}
}

// TestSyncReleaseGoneIsNotRetried: convoy-api's 404 for a Release that no longer exists
// does not fail the pass, and later passes do not send it again.
func TestSyncReleaseGoneIsNotRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	f.api.notFound.Store(true)
	f.pass() // fails the test on error
	f.api.notFound.Store(false)
	f.pass()
	if n := f.api.syncs.Load(); n != 0 {
		t.Fatalf("a 404 was retried: %d requests reached the endpoint", n)
	}
}

// TestSyncWrongPathIsRetried: a --sync-url whose path is wrong answers 404 for every
// Release; that is an error (retried, counted as error), not a Release that is gone, and
// the edge reaches the controller-manager once the URL is right.
func TestSyncWrongPathIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", "true")
	f.inventory(cm("a", 0, "r1"))
	errorsBefore := testutil.ToFloat64(syncRequests.WithLabelValues("error"))
	f.h.Waker = &syncapiclient.Client{BaseURL: f.api.URL + "/wrong"}
	if _, err := f.h.syncHandler(f.ctx, f.key); err == nil {
		t.Fatal("a 404 from a wrong --sync-url path did not fail the pass")
	}
	if got := testutil.ToFloat64(syncRequests.WithLabelValues("error")); got < errorsBefore+1 {
		t.Fatal("a 404 from a wrong path was not counted as an error")
	}
	f.h.Waker = &syncapiclient.Client{BaseURL: f.api.URL}
	before := f.api.syncs.Load() // the wrong path reached the server too
	f.pass()
	if n := f.api.syncs.Load() - before; n != 1 {
		t.Fatalf("sync requests after fixing the URL = %d, want 1", n)
	}
	rel := f.getRelease()
	if rel.Annotations[v1alpha1.SyncRequestedAtAnnotation] == "" {
		t.Fatal("the sync annotation was not set")
	}
}
