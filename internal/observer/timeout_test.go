package observer_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/observer"
)

// hangingStatusWrites is an http.RoundTripper that holds the first `hang` writes of a
// Release's status until the request is given up (its context ends), as a management
// API server behind a hung connection would.
type hangingStatusWrites struct {
	next http.RoundTripper
	hang int32
	// seen counts the status writes of every client wrapped with the same counter.
	seen *atomic.Int32
}

func (h hangingStatusWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/releases/") &&
		strings.HasSuffix(req.URL.Path, "/status") && h.seen.Add(1) <= h.hang {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return h.next.RoundTrip(req)
}

// TestHungWriteIsCutAndRetried: a write of the loop that the management API server never
// answers fails after --request-timeout and the pass is retried, so the Healthy condition
// lands; without the bound the worker would wait on the write forever.
func TestHungWriteIsCutAndRetried(t *testing.T) {
	ns := namespace(t)
	cluster(t, ns, "c", "", nil)
	release(t, ns, "r", "c", nil)
	var seen atomic.Int32
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return hangingStatusWrites{next: rt, hang: 2, seen: &seen}
	}
	replicaOn(t, cfg, ns, options(func(o *observer.Options) { o.Management.RequestTimeout = 500 * time.Millisecond }))
	waitReason(t, ns, "r", v1alpha1.ReasonNotConfigured)
	if n := seen.Load(); n < 3 {
		t.Fatalf("%d status writes, want the 2 held ones and the one that landed", n)
	}
}
