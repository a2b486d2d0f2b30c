package syncapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// FieldManagerSync is the field manager of the /sync endpoint's merge patch, so the
// managedFields of a Release tell who set the sync annotation.
const FieldManagerSync = "convoy-api"

// SyncResponse is the body of a 202 answer of POST …/releases/{name}/sync.
type SyncResponse struct {
	// Release is "namespace/name".
	Release string `json:"release"`
	// SyncRequestedAt is the value written to the convoy.kumodo.io/sync-requested-at
	// annotation (RFC 3339 with nanoseconds, UTC).
	SyncRequestedAt string `json:"syncRequestedAt"`
}

// OpenAPIModelName names SyncResponse in OpenAPI.
func (SyncResponse) OpenAPIModelName() string { return openAPIModelPrefix + "SyncResponse" }

// Handler serves the Release subresources /sync and /health, the discovery document of
// the group-version, and /healthz. convoy-api mounts it behind k8s.io/apiserver (package
// internal/syncapi/apiserver), which authenticates and authorizes every request
// first; on its own, it does neither (tests use it so). Create it with NewHandler; it is
// safe for concurrent use once its fields are set.
type Handler struct {
	// Now is the clock of /sync; NewHandler sets time.Now.
	Now func() time.Time
	// Log receives one line per request, naming the authenticated user when the request
	// context has one; NewHandler sets klog's logger.
	Log logr.Logger
	// Reader serves the reads of /health (Release and ReleaseInventory); NewHandler sets
	// the client itself. An informer cache makes /health independent of the API server;
	// it must keep the inventory's managedFields, which decide the entries shown.
	Reader client.Reader
	// Fallback, when not nil, is asked when Reader does not know the Release (a cache
	// that has not seen it yet), and then also for its inventory, so that a Release
	// created a moment ago is no 404.
	Fallback client.Reader
	// Explainer, when not nil, fills the rulesApplied of the /health entries and the
	// decidedBy of those that are not Healthy by re-reading the selected rules (and
	// re-evaluating them) on each request, and decidedByError when it cannot; nil leaves
	// them null.
	Explainer *Explainer

	client client.Client
}

// NewHandler returns a Handler that patches Releases through c (a client whose scheme
// knows convoy.kumodo.io/v1alpha1) and, until Reader is changed, reads through c too.
func NewHandler(c client.Client) *Handler {
	return &Handler{Now: time.Now, Log: klog.Background().WithName("subresources"), Reader: c, client: c}
}

// ServeHTTP routes a request. Unknown paths answer 404, release paths with names that
// cannot be valid answer 400, and a known path with the wrong method answers 405 with an
// Allow header. Every error body is a metav1.Status, as an aggregated API answers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &statusRecorder{ResponseWriter: w}
	release := ""
	defer func() {
		// Probes come every few seconds: keep them out of the default log level.
		log := h.Log
		if r.URL.Path == HealthzPath {
			log = log.V(1)
		}
		kv := []any{"method", r.Method, "path", r.URL.Path, "status", rw.status(), "release", release}
		if u, ok := request.UserFrom(r.Context()); ok {
			kv = append(kv, "user", u.GetName(), "groups", u.GetGroups())
		}
		log.Info("request", kv...)
	}()

	path := r.URL.EscapedPath()
	switch path {
	case HealthzPath:
		if !allow(rw, r, http.MethodGet, http.MethodHead) {
			return
		}
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write([]byte("ok"))
		return
	case PathPrefix:
		if !allow(rw, r, http.MethodGet) {
			return
		}
		writeJSON(rw, http.StatusOK, discovery())
		return
	}

	route, err := parseReleasePath(path)
	if errors.Is(err, errNoRoute) {
		writeStatus(rw, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the server could not find the requested resource %s", r.URL.Path), nil)
		return
	}
	if err != nil {
		writeStatus(rw, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(), nil)
		return
	}
	release = route.namespace + "/" + route.name
	switch route.subresource {
	case SubresourceSync:
		if allow(rw, r, http.MethodPost) {
			h.serveSync(rw, r, route)
		}
	case SubresourceHealth:
		if allow(rw, r, http.MethodGet) {
			h.serveHealth(rw, r, route)
		}
	}
}

// SyncTimeFormat is the layout of the sync annotation: RFC 3339 with all nine digits of
// nanoseconds (time.RFC3339Nano drops trailing zeros), so two requests within one second
// always differ and every value parses with time.RFC3339Nano.
const SyncTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// serveSync sets the sync annotation with a JSON merge patch: it carries no
// resourceVersion, so it never conflicts with the controller-manager's writes, and it
// names no other field, so it changes nothing else.
func (h *Handler) serveSync(w http.ResponseWriter, r *http.Request, route releaseRoute) {
	now := h.Now().UTC().Format(SyncTimeFormat)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"annotations": map[string]string{v1alpha1.SyncRequestedAtAnnotation: now},
		},
	})
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error(), nil)
		return
	}
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: route.namespace, Name: route.name}}
	err = h.client.Patch(r.Context(), rel, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManagerSync))
	if err != nil {
		writeAPIError(w, route, "setting the sync annotation of", err)
		return
	}
	writeJSON(w, http.StatusAccepted, SyncResponse{Release: route.namespace + "/" + route.name, SyncRequestedAt: now})
}

// serveHealth reads the Release and its ReleaseInventory and answers HealthResult.
func (h *Handler) serveHealth(w http.ResponseWriter, r *http.Request, route releaseRoute) {
	key := client.ObjectKey{Namespace: route.namespace, Name: route.name}
	reader := h.Reader
	rel := &v1alpha1.Release{}
	err := reader.Get(r.Context(), key, rel)
	if apierrors.IsNotFound(err) && h.Fallback != nil {
		reader = h.Fallback
		err = reader.Get(r.Context(), key, rel)
	}
	if err != nil {
		writeAPIError(w, route, "reading", err)
		return
	}
	inv := &v1alpha1.ReleaseInventory{}
	if err := reader.Get(r.Context(), key, inv); err != nil {
		if !apierrors.IsNotFound(err) {
			writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError,
				fmt.Sprintf("reading ReleaseInventory %s/%s: %v", route.namespace, route.name, err), nil)
			return
		}
		inv = nil
	}
	resp, err := HealthResult(rel, inv)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error(), nil)
		return
	}
	if h.Explainer != nil {
		if err := h.Explainer.Explain(r.Context(), rel, inv, &resp); err != nil {
			resp.DecidedByError = err.Error()
			h.Log.V(1).Info("explaining health", "release", resp.Release, "err", err.Error())
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// writeAPIError answers an error of the API server about the Release: 404 naming the
// release when it does not exist, else 500 with the error.
func writeAPIError(w http.ResponseWriter, route releaseRoute, doing string, err error) {
	details := &metav1.StatusDetails{Group: v1alpha1.GroupVersion.Group, Kind: "releases", Name: route.name}
	if apierrors.IsNotFound(err) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("release %s/%s not found", route.namespace, route.name), details)
		return
	}
	writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError,
		fmt.Sprintf("%s Release %s/%s: %v", doing, route.namespace, route.name, err), details)
}

// allow answers 405 with an Allow header unless r's method is one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	allowed := methods[0]
	for _, m := range methods[1:] {
		allowed += ", " + m
	}
	w.Header().Set("Allow", allowed)
	writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allowed), nil)
	return false
}

// discovery is the APIResourceList of the group-version. The kube-aggregator probes
// this path to mark an APIService available.
func discovery() *metav1.APIResourceList {
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: Group + "/" + Version,
		APIResources: []metav1.APIResource{
			{Name: "releases/" + SubresourceSync, Namespaced: true, Kind: "SyncResponse", Verbs: metav1.Verbs{"create"}},
			{Name: "releases/" + SubresourceHealth, Namespaced: true, Kind: "HealthResponse", Verbs: metav1.Verbs{"get"}},
		},
	}
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string, details *metav1.StatusDetails) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Details:  details,
		Code:     int32(code),
	})
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		code = http.StatusInternalServerError
		data = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

// statusRecorder remembers the status code written, for the request log.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}
