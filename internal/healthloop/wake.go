package healthloop

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// edges are the edge triggers of one pass (docs/design.md, "Wake the controller").
type edges struct {
	waveCompleted  bool
	renderAdvanced bool
	hooksFinished  int
}

func (e edges) any() bool { return e.waveCompleted || e.renderAdvanced || e.hooksFinished > 0 }

// releaseGone reports whether err, the error of a sync request for the Release name,
// says that this Release does not exist: a metav1.Status of reason NotFound whose
// details name it (kind releases or Release or none; group convoy.kumodo.io or none),
// as an apierrors.APIStatus (the client of internal/syncapi/client returns one, through the kube-apiserver
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
