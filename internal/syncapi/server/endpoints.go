package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kumodo/convoy-observer/internal/syncapi"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// FieldManagerSync is the field manager of the /sync endpoint's merge patch, so the
// managedFields of a Release tell who set the sync annotation.
const FieldManagerSync = "convoy-api"

// Endpoints answers the Release subresources /sync and /health. convoy-api's storage
// (package internal/syncapi/apiserver) calls it once k8s.io/apiserver has routed,
// authenticated and authorized a request, so it does no routing of its own: it gets the
// namespace and name, and answers a body or an *apierrors.StatusError. Create it with
// NewEndpoints; it is safe for concurrent use once its fields are set.
type Endpoints struct {
	// Now is the clock of /sync; NewEndpoints sets time.Now.
	Now func() time.Time
	// Log receives one line per request, naming the authenticated user when the request
	// context has one; NewEndpoints sets klog's logger.
	Log logr.Logger
	// Reader serves the reads of /health (Release and ReleaseInventory); NewEndpoints
	// sets the client itself. An informer cache makes /health independent of the API
	// server; it must keep the inventory's managedFields, which decide the entries shown.
	Reader client.Reader
	// Fallback, when not nil, is asked when Reader does not know the Release (a cache
	// that has not seen it yet), and then also for its inventory, so that a Release
	// created a moment ago is no 404.
	Fallback client.Reader

	client client.Client
}

// NewEndpoints returns Endpoints that patch Releases through c (a client whose scheme
// knows convoy.kumodo.io/v1alpha1) and, until Reader is changed, read through c too.
func NewEndpoints(c client.Client) *Endpoints {
	return &Endpoints{Now: time.Now, Log: klog.Background().WithName("syncapi"), Reader: c, client: c}
}

// Sync sets the sync annotation of the Release namespace/name with a JSON merge patch:
// it carries no resourceVersion, so it never conflicts with the controller-manager's
// writes, and it names no other field, so it changes nothing else. Errors: 400 for
// names that cannot be valid, 404 when the Release does not exist, else 500.
func (e *Endpoints) Sync(ctx context.Context, namespace, name string) (resp *syncapi.SyncResponse, err error) {
	defer e.log(ctx, syncapi.SubresourceSync, namespace, name, &err)
	if err := validNames(namespace, name); err != nil {
		return nil, err
	}
	now := e.Now().UTC().Format(syncapi.SyncTimeFormat)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"annotations": map[string]string{v1alpha1.SyncRequestedAtAnnotation: now},
		},
	})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err = e.client.Patch(ctx, rel, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManagerSync))
	if err != nil {
		return nil, releaseError(namespace, name, "setting the sync annotation of", err)
	}
	return &syncapi.SyncResponse{Release: namespace + "/" + name, SyncRequestedAt: now}, nil
}

// Health reads the Release namespace/name and its ReleaseInventory and answers their
// syncapi.HealthResult (BuildHealthResult: decidedBy and rulesApplied too come from the
// inventory, as the observer recorded them; nothing of the target cluster is read).
// Errors: 400 for names that cannot be valid, 404 when the Release does not exist,
// else 500.
func (e *Endpoints) Health(ctx context.Context, namespace, name string) (resp *syncapi.HealthResult, err error) {
	defer e.log(ctx, syncapi.SubresourceHealth, namespace, name, &err)
	if err := validNames(namespace, name); err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	reader := e.Reader
	rel := &v1alpha1.Release{}
	err = reader.Get(ctx, key, rel)
	if apierrors.IsNotFound(err) && e.Fallback != nil {
		reader = e.Fallback
		err = reader.Get(ctx, key, rel)
	}
	if err != nil {
		return nil, releaseError(namespace, name, "reading", err)
	}
	inv := &v1alpha1.ReleaseInventory{}
	if err := reader.Get(ctx, key, inv); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, internalError(fmt.Sprintf("reading ReleaseInventory %s/%s: %v", namespace, name, err))
		}
		inv = nil
	}
	out, err := BuildHealthResult(rel, inv)
	if err != nil {
		return nil, internalError(err.Error())
	}
	return &out, nil
}

// log writes the request line: subresource, release, status code and user.
func (e *Endpoints) log(ctx context.Context, subresource, namespace, name string, err *error) {
	code := 200
	if *err != nil {
		code = 500
		if st, ok := (*err).(apierrors.APIStatus); ok {
			code = int(st.Status().Code)
		}
	} else if subresource == syncapi.SubresourceSync {
		code = 202
	}
	kv := []any{"subresource", subresource, "status", code, "release", namespace + "/" + name}
	if u, ok := request.UserFrom(ctx); ok {
		kv = append(kv, "user", u.GetName(), "groups", u.GetGroups())
	}
	e.Log.Info("request", kv...)
}

// validNames answers 400 unless namespace is a DNS-1123 label and name a DNS-1123
// subdomain, as the API server requires of a Release, so that a bad name is a 400
// rather than a confusing 404.
func validNames(namespace, name string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid namespace %q: %s", namespace, strings.Join(errs, "; ")))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid release name %q: %s", name, strings.Join(errs, "; ")))
	}
	return nil
}

// releaseError is an error of the API server about the Release: 404 naming the release
// when it does not exist, else 500 with the error.
func releaseError(namespace, name, doing string, err error) error {
	details := &metav1.StatusDetails{Group: v1alpha1.GroupVersion.Group, Kind: "releases", Name: name}
	if apierrors.IsNotFound(err) {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Details: details,
			Message: fmt.Sprintf("release %s/%s not found", namespace, name),
		}}
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Details: details,
		Message: fmt.Sprintf("%s Release %s/%s: %v", doing, namespace, name, err),
	}}
}

func internalError(message string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: message,
	}}
}
