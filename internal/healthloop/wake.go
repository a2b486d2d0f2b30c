package healthloop

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/controller/base"
)

// edges are the edge triggers of one pass (docs/design.md, "Wake the controller").
type edges struct {
	waveCompleted  bool
	renderAdvanced bool
	hooksFinished  int
}

func (e edges) any() bool { return e.waveCompleted || e.renderAdvanced || e.hooksFinished > 0 }

// armWake marks key as owing a sync request, before the pass writes the state that
// caused it: if the pass fails after that write, its retry no longer sees the edge but
// still sends the request.
func (h *HealthController) armWake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wakePending == nil {
		h.wakePending = map[string]bool{}
	}
	h.wakePending[key] = true
}

// wake sends one POST …/sync for rel when this pass has an edge, or when an earlier
// pass armed one that was not sent (the edge itself does not come back). A failed
// request fails the pass, so the work queue retries the key. sent reports that the
// debt is settled: the request succeeded, or there is nobody to wake (no Waker, the
// Release is gone).
func (h *HealthController) wake(ctx context.Context, rel *v1alpha1.Release, e edges) (sent bool, err error) {
	key := base.KeyOf(rel)
	h.mu.Lock()
	retry := h.wakePending[key] && !e.any()
	owed := e.any() || h.wakePending[key]
	h.mu.Unlock()
	if !owed {
		return false, nil
	}
	log := h.logFrom(ctx).WithValues("waveCompleted", e.waveCompleted, "renderAdvanced", e.renderAdvanced, "hooksFinished", e.hooksFinished, "retry", retry)
	if h.Waker == nil {
		h.disarmWake(key)
		log.Info("edge reached, but sync requests are disabled (--disable-sync): the controller-manager is not woken")
		return true, nil
	}
	err = h.Waker.RequestSync(ctx, rel.Namespace, rel.Name)
	if err != nil && releaseGone(err, rel.Name) {
		// The Release is gone: nobody is left to wake, and a retry would never succeed.
		h.disarmWake(key)
		syncRequests.WithLabelValues("gone").Inc()
		log.Info("the sync endpoint says the Release does not exist; not retrying", "error", err.Error())
		return true, nil
	}
	if err != nil { // still armed: the next pass sends it again
		if ctx.Err() == nil {
			syncRequests.WithLabelValues("error").Inc()
		}
		return false, fmt.Errorf("waking the controller-manager: %w", err)
	}
	syncRequests.WithLabelValues("ok").Inc()
	h.disarmWake(key)
	log.Info("woke the controller-manager")
	return true, nil
}

func (h *HealthController) disarmWake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.wakePending, key)
}

// releaseGone reports whether err, the error of a sync request for the Release name,
// says that this Release does not exist: a metav1.Status of reason NotFound whose
// details name it (kind releases or Release or none; group convoy.kumodo.io or none),
// as an apierrors.APIStatus (syncapi.Client returns one, through the kube-apiserver
// or from a direct --sync-url). Any other 404 — a wrong --sync-url path, an APIService
// that is not served — is an error: the edge is kept and the request retried.
func releaseGone(err error, name string) bool {
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) {
		return false
	}
	s := apiStatus.Status()
	st := &s
	if st.Reason != metav1.StatusReasonNotFound || (st.Code != 0 && st.Code != http.StatusNotFound) || st.Details == nil {
		return false
	}
	d := st.Details
	if d.Name != name {
		return false
	}
	for _, c := range d.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return false // client-go made this Status up from a body that was not one
		}
	}
	switch strings.ToLower(d.Kind) {
	case "", "releases", "release":
	default:
		return false
	}
	return d.Group == "" || d.Group == v1alpha1.GroupVersion.Group
}

func (h *HealthController) logFrom(ctx context.Context) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l
	}
	return h.Log
}
