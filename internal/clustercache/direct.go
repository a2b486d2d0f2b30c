package clustercache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
)

// dynamicReader reads target objects with GETs. After a read that found the cluster
// not answering it holds the cluster down (reads fail at once) for holdDown.
type dynamicReader struct {
	client  dynamic.Interface
	cluster string
	// identity is the impersonated read identity, "" for the config's own: a 403 of
	// a read as identity becomes a ForbiddenError.
	identity string
	holdDown time.Duration
	clock    clock.PassiveClock
	// probe asks the server for /version: it tells a dead cluster from one slow object
	// or list. Callers go through answers, which shares one probe among them.
	probe func() error
	// answerFresh is how long an answer of the probe vouches for the server (SyncWait).
	answerFresh time.Duration

	flight     singleflight.Group
	mu         sync.Mutex
	downUntil  time.Time
	downErr    error
	answeredAt time.Time // the last answer of the probe
}

// answers reports whether the server answers /version (with any status): nil when the
// probe answered within the last answerFresh, else after one probe that every caller
// meanwhile shares, so that a busy server gets one probe per answerFresh, not one per
// waiting read. A caller whose ctx ends stops waiting (ctx's error; the probe goes on for
// the others, bounded by the client's timeout). A reader without a probe never vouches
// (errNoProbe).
func (r *dynamicReader) answers(ctx context.Context) error {
	if r.probe == nil {
		return errNoProbe
	}
	r.mu.Lock()
	fresh := r.clock.Since(r.answeredAt) < r.answerFresh
	r.mu.Unlock()
	if fresh {
		return nil
	}
	ch := r.flight.DoChan("", func() (any, error) {
		err := r.probe()
		if !IsConnectionError(err) { // any status is an answer (a 403 for /version too)
			err = nil
			r.mu.Lock()
			r.answeredAt = r.clock.Now()
			r.mu.Unlock()
		}
		return nil, err
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errNoProbe = errors.New("no probe of the server")

// hold holds the cluster down for holdDown after err (a read or probe that got no
// answer) and returns the error of reads meanwhile.
func (r *dynamicReader) hold(err error) error {
	r.mu.Lock()
	r.downUntil, r.downErr = r.clock.Now().Add(r.holdDown), err
	r.mu.Unlock()
	return fmt.Errorf("%w: Cluster %s: %w", ErrClusterNotConnected, r.cluster, err)
}

// heldDown returns the error of a cluster held down after it did not answer, or nil.
func (r *dynamicReader) heldDown() error {
	r.mu.Lock()
	until, last := r.downUntil, r.downErr
	r.mu.Unlock()
	if now := r.clock.Now(); now.Before(until) {
		return fmt.Errorf("%w: Cluster %s did not answer (not retried before %s): %w",
			ErrClusterNotConnected, r.cluster, until.UTC().Format(time.RFC3339), last)
	}
	return nil
}

func (r *dynamicReader) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if err := r.heldDown(); err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = r.client.Resource(gvr)
	if namespace != "" {
		ri = r.client.Resource(gvr).Namespace(namespace)
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err == nil || !IsConnectionError(err) {
		return u, asForbidden(err, r.identity, gvr, namespace, name)
	}
	return nil, r.notAnswered(ctx, err)
}

// List implements ObjectLister with one LIST of at most MaxListItems objects.
func (r *dynamicReader) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error) {
	if err := r.heldDown(); err != nil {
		return nil, err
	}
	l, err := r.client.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String(), Limit: MaxListItems})
	if err == nil {
		return l.Items, nil
	}
	if !IsConnectionError(err) {
		var fe *ForbiddenError
		if err = asForbidden(err, r.identity, gvr, namespace, ""); errors.As(err, &fe) {
			fe.Verb = "list"
		}
		return nil, err
	}
	return nil, r.notAnswered(ctx, err)
}

// notAnswered is the error of a read that the server did not answer (a connection
// error): it holds the cluster down, unless the server still answers /version (one slow
// object) or the caller gave up.
func (r *dynamicReader) notAnswered(ctx context.Context, err error) error {
	if ctx.Err() != nil { // our caller gave up (shutdown, a sibling's failure): no verdict
		return fmt.Errorf("%w: Cluster %s: %w", ErrClusterNotConnected, r.cluster, err)
	}
	// A request that was connected and then timed out may be one slow object (a hung
	// conversion webhook or aggregated API) or a busy server: ask the server itself
	// before holding the whole cluster down. A failed dial needs no second opinion.
	if !isDialError(err) {
		switch aerr := r.answers(ctx); {
		case aerr == nil:
			return fmt.Errorf("the server answers, but not for this object: %w", err)
		case ctx.Err() != nil: // gave up while the probe ran: no verdict either
			return fmt.Errorf("%w: Cluster %s: %w", ErrClusterNotConnected, r.cluster, err)
		}
	}
	return r.hold(err)
}

// isDialError reports whether err failed to open a connection at all (refused,
// unreachable, or a dial timeout).
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// IsConnectionError reports whether err says that the server did not answer at all
// (a transport error, a timeout of the request) as opposed to an API status: any
// status, even 503 from one unavailable aggregated API, concerns one object and leaves
// the rest of the cluster readable.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrClusterNotConnected) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var uerr *url.Error
	var nerr net.Error
	return errors.As(err, &uerr) || errors.As(err, &nerr) || errors.Is(err, context.DeadlineExceeded)
}
