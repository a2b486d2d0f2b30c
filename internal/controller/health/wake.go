package health

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/controller/base"
	"github.com/kumodo/convoy-observer/internal/subresources"
)

// edges are the edge triggers of one pass (spec "Wake the controller").
type edges struct {
	waveCompleted  bool
	renderAdvanced bool
	hooksFinished  int
}

func (e edges) any() bool { return e.waveCompleted || e.renderAdvanced || e.hooksFinished > 0 }

// wake sends one POST …/sync for rel when this pass has an edge, or when the request of
// an earlier pass failed (the edge itself does not come back). A failed request fails
// the pass, so the work queue retries the key.
func (h *HealthController) wake(ctx context.Context, rel *v1alpha1.Release, e edges) error {
	key := base.KeyOf(rel)
	h.mu.Lock()
	retry := h.wakePending[key]
	h.mu.Unlock()
	if !e.any() && !retry {
		return nil
	}
	log := h.logFrom(ctx).WithValues("waveCompleted", e.waveCompleted, "renderAdvanced", e.renderAdvanced, "hooksFinished", e.hooksFinished, "retry", retry)
	if h.Waker == nil {
		log.Info("edge reached, but no --sync-url is set: the controller-manager is not woken")
		return nil
	}
	err := h.Waker.RequestSync(ctx, rel.Namespace, rel.Name)
	var httpErr *subresources.HTTPError
	if errors.As(err, &httpErr) && httpErr.StatusCode == http.StatusNotFound {
		// The Release is gone: nobody is left to wake, and a retry would never succeed.
		log.Info("the sync endpoint no longer knows the Release; not retrying", "error", err.Error())
		err = nil
	}
	if err != nil {
		syncRequests.WithLabelValues("error").Inc()
		h.mu.Lock()
		if h.wakePending == nil {
			h.wakePending = map[string]bool{}
		}
		h.wakePending[key] = true
		h.mu.Unlock()
		return fmt.Errorf("waking the controller-manager: %w", err)
	}
	syncRequests.WithLabelValues("ok").Inc()
	h.mu.Lock()
	delete(h.wakePending, key)
	h.mu.Unlock()
	log.Info("woke the controller-manager")
	return nil
}

func (h *HealthController) logFrom(ctx context.Context) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l
	}
	return h.Log
}
