package healthloop

import (
	"errors"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// A failed assessment is told apart by its typed cause, never by its text: the cluster
// is unreachable (errors.Is clustercache.ErrClusterNotConnected), the rules do not
// compile (errors.As *health.CompileError), or anything else. The cause decides the
// Event reason of this pass (conditionKind). A later pass, in this process or another
// one, only has the condition that this pass wrote, so assessFailed writes the kind into
// the condition message at a fixed place, as a detail constant after
// assessFailedPrefix, and priorKind reads it back from there and nowhere else.

// assessFailedPrefix starts the condition message of a failed assessment.
const assessFailedPrefix = "assessment failed: "

// The details of the failure kinds, written right after assessFailedPrefix.
const (
	detailRulesInvalid       = "compiling health rules: "
	detailClusterUnreachable = "cluster not connected: "
	detailOther              = "error: "
)

// failureKind is the Event reason of the failed assessment err, from its typed cause.
func failureKind(err error) string {
	var compileErr *health.CompileError
	switch {
	case errors.As(err, &compileErr):
		return EventRulesInvalid
	case errors.Is(err, clustercache.ErrClusterNotConnected):
		return EventClusterUnreachable
	}
	return EventAssessmentFailed
}

// failureMessage is the condition message of the failed assessment err: assessFailedPrefix,
// the detail of its kind (once: an error whose text starts with it keeps its text), and
// the error; for an unreachable cluster its clustercache.DescribeError, never what the
// target answered. Any other error whose text starts like a detail gets detailOther
// first, so it never reads back as that kind.
func failureMessage(err error) string {
	text := err.Error()
	detail := ""
	switch failureKind(err) {
	case EventRulesInvalid:
		detail = detailRulesInvalid
	case EventClusterUnreachable:
		// It may carry what the target answered: only its description.
		text = clustercache.DescribeError(err)
		detail = detailClusterUnreachable
	default:
		if strings.HasPrefix(text, detailRulesInvalid) || strings.HasPrefix(text, detailClusterUnreachable) {
			detail = detailOther
		}
	}
	if !strings.HasPrefix(text, detail) {
		text = detail + text
	}
	return assessFailedPrefix + text
}

// assessFailed is the status when observeEntries returned err: Unknown, with the previous
// healthSummary kept, and err as the cause of its Event.
func assessFailed(rel *v1alpha1.Release, err error) healthStatus {
	return healthStatus{status: metav1.ConditionUnknown, reason: v1alpha1.ReasonUnknown,
		message: failureMessage(err), summary: rel.Status.HealthSummary.DeepCopy(), cause: err}
}

// conditionKind sorts the Healthy condition hs of this pass for edge detection: its
// reason, or for a failed assessment the kind of its typed cause (a rule set that does
// not compile with the message, so another broken rule is a new edge).
func conditionKind(hs healthStatus) string {
	if hs.cause == nil {
		return hs.reason
	}
	kind := failureKind(hs.cause)
	if kind == EventRulesInvalid {
		// As written to the condition (one line), so the kind of this pass compares
		// equal to the one priorKind reads back from the Release.
		return EventRulesInvalid + ":" + truncateCondition(hs.message)
	}
	return kind
}

// priorKind is conditionKind of a condition read back from the Release, which keeps no
// cause: the kind of a failed assessment is the detail that assessFailed wrote right
// after assessFailedPrefix.
func priorKind(c *metav1.Condition) string {
	cause, failed := strings.CutPrefix(c.Message, assessFailedPrefix)
	if c.Reason != v1alpha1.ReasonUnknown || !failed {
		return c.Reason
	}
	switch {
	case strings.HasPrefix(cause, detailRulesInvalid):
		return EventRulesInvalid + ":" + c.Message
	case strings.HasPrefix(cause, detailClusterUnreachable):
		return EventClusterUnreachable
	}
	return EventAssessmentFailed
}
