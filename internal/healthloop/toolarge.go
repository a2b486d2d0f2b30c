package healthloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// A write refused as too large (docs/design.md, "The write protocol") is said once and
// not retried: the same inventory would be read, assessed and refused again on every
// retry, each time reading all its objects from the target. The pass writes the Healthy
// condition Unknown with the size and what to do (split the Release), returns no error,
// and remembers the refusal (releaseMemory.refused); later passes over the same
// inventory read and write nothing until it changes, or until the Release's interval
// (refusedRecheck without one) has passed.

// refusedRecheck is how long a refused inventory is left alone when the Release has no
// syncPolicy.interval.
const refusedRecheck = 10 * time.Minute

// refusedWrite is an inventory apply that the API server refused as too large.
type refusedWrite struct {
	// write is what was applied ("entries" or "hooks"), items how many of them.
	write string
	items int
	// bytes is the size of the apply's body; 0 when unknown.
	bytes int
	// why is the refusal as tooLargeKind describes it.
	why string
	err error
}

func (r *refusedWrite) Error() string { return r.err.Error() }
func (r *refusedWrite) Unwrap() error { return r.err }

// asRefused returns err as a *refusedWrite of the apply ac (write, items) when the API
// server refused it as too large, else err unchanged.
func asRefused(write string, items int, ac any, err error) error {
	why := tooLargeKind(err)
	if why == "" {
		return err
	}
	n := 0
	if b, jerr := json.Marshal(ac); jerr == nil {
		n = len(b) // what controller-runtime sends as the body of the apply
	}
	return &refusedWrite{write: write, items: items, bytes: n, why: why, err: err}
}

// status is the Healthy condition of a Release whose inventory write r was refused:
// Unknown, with the previous healthSummary kept (the entries' new states were not
// written), the size, and what to do. It has no cause: its kind is Unknown, as the same
// condition read back from the Release.
func (r *refusedWrite) status(rel *v1alpha1.Release) healthStatus {
	what := fmt.Sprintf("the health of %d entries", r.items)
	if r.write == "hooks" {
		what = fmt.Sprintf("the state of %d hooks", r.items)
	}
	size := r.why
	if r.bytes > 0 {
		size = fmt.Sprintf("an apply of %d bytes refused with %s", r.bytes, r.why)
	}
	return healthStatus{status: metav1.ConditionUnknown, reason: v1alpha1.ReasonUnknown,
		message: fmt.Sprintf("cannot record %s: the ReleaseInventory exceeds the API server's size limit (%s); "+
			"split the Release into smaller ones; the inventory is assessed again when it changes", what, size),
		summary: rel.Status.HealthSummary.DeepCopy()}
}

// tooLarge reports whether err says that the written object exceeds the size limit of
// the API server or of etcd (tooLargeKind).
func tooLarge(err error) bool { return tooLargeKind(err) != "" }

// tooLargeKind describes how the API server refused a write as too large, "" when err
// is no such refusal: a 413 RequestEntityTooLarge (the request body is over the API
// server's limit), or a 500 whose message or causes carry one of passedOnTooLarge's
// texts (the object is over etcd's limits). The code and reason come from the typed
// Status; only the 500 needs its text.
func tooLargeKind(err error) string {
	if apierrors.IsRequestEntityTooLargeError(err) {
		return "413 RequestEntityTooLarge"
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInternalError(err) {
		return ""
	}
	st := status.Status()
	texts := []string{st.Message}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			texts = append(texts, c.Message)
		}
	}
	for _, text := range texts {
		if says := passedOnTooLarge(text); says != "" {
			code := fmt.Sprint(st.Code)
			if st.Reason != metav1.StatusReasonUnknown {
				code += " " + string(st.Reason)
			}
			return code + ": " + says
		}
	}
	return ""
}

// passedOnTooLarge reads the text of a 500 for the errors of etcd and of gRPC that mean
// "too large", and says which. The API server passes them on as text, without a reason
// or code of their own (etcd's own error as an InternalError; a gRPC status as a 500
// without a reason), so this is the one place that reads a message; everything else asks
// tooLarge or tooLargeKind. The texts:
//   - etcd's rpctypes.ErrRequestTooLarge: the request is over etcd's --max-request-bytes
//     (1.5 MiB by default);
//   - gRPC's ResourceExhausted of the API server's etcd client, "trying to send message
//     larger than max": the object is over the client's message limit (2 MiB; seen with
//     an inventory of 4000 entries);
//   - the same of etcd's gRPC server, "received message larger than max".
func passedOnTooLarge(text string) string {
	switch {
	case strings.Contains(text, etcdRequestTooLarge):
		return "etcd's request is too large"
	case strings.Contains(text, "trying to send message larger than max"), strings.Contains(text, "received message larger than max"):
		return "gRPC's message is larger than its limit"
	}
	return ""
}

// etcdRequestTooLarge is etcd's rpctypes.ErrRequestTooLarge as the API server reports
// it (a test checks it against etcd's constant).
const etcdRequestTooLarge = "etcdserver: request is too large"

// refusal is what the loop remembers of a refused write (releaseMemory.refused): which
// inventory, as which resourceVersions (the one the pass read, and the one its last
// successful write produced), at which generation of the Release, and until when it is
// left alone.
type refusal struct {
	uid              types.UID
	resourceVersions []string
	generation       int64
	until            time.Time
}

// refused writes the condition of the refused write r (with its Event), then remembers
// the refusal so that later passes over the same inventory read nothing. It returns
// only a failed condition write, for the queue to retry.
func (c *committer) refused(ctx context.Context, prev *metav1.Condition, r *refusedWrite) error {
	c.h.logFrom(ctx).Error(r, "the API server refused the inventory write as too large; not retried until the inventory changes",
		"write", r.write, "items", r.items, "bytes", r.bytes)
	if err := c.condition(ctx, prev, r.status(c.rel), nil); err != nil {
		return err
	}
	window := refusedRecheck
	if interval, ok := c.rel.GetInterval(); ok && interval > 0 {
		window = interval
	}
	ref := &refusal{uid: c.inv.UID, resourceVersions: []string{c.inv.ResourceVersion, c.rv},
		generation: c.rel.Generation, until: c.h.Clock.Now().Add(window)}
	c.h.remember(keyOf(c.rel), func(m *releaseMemory) { m.refused = ref })
	return nil
}

// stillRefused reports whether the pass of rel over the inventory pi would only repeat
// a refused write: the same inventory at the same resourceVersion, the same generation
// of the Release, before the refusal's time is up. Otherwise it drops the refusal.
func (h *HealthController) stillRefused(key string, rel *v1alpha1.Release, pi passInventory) bool {
	now := h.Clock.Now()
	still := false
	h.remember(key, func(m *releaseMemory) {
		r := m.refused
		if r == nil {
			return
		}
		still = pi.inv != nil && pi.inv.UID == r.uid && slices.Contains(r.resourceVersions, pi.inv.ResourceVersion) &&
			rel.Generation == r.generation && now.Before(r.until)
		if !still {
			m.refused = nil
		}
	})
	return still
}
