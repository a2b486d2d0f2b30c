package healthloop

import (
	"errors"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// TestFailureKindFromTypedCauses: the kind of a failed assessment (its Event reason)
// comes from the typed cause, and the condition written for it reads back as the same
// kind, whatever the error's text says and wherever the cause sits in the chain.
func TestFailureKindFromTypedCauses(t *testing.T) {
	t.Parallel()
	compile := &health.CompileError{Kind: "HealthRuleSet", Namespace: "ns", Name: "broken", Field: health.FieldRuleExpression,
		Expression: "'cluster not connected' ==", Err: errors.New("syntax error")}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"unreachable, sentinel first", fmt.Errorf("%w: Cluster ns/c not found", clustercache.ErrClusterNotConnected), EventClusterUnreachable},
		{"unreachable, sentinel deep in the chain", fmt.Errorf("reading Cluster ns/c: %w", clustercache.ErrClusterNotConnected), EventClusterUnreachable},
		{"a text that only reads like it", errors.New("reading Cluster ns/c: cluster not connected: no"), EventAssessmentFailed},
		{"a text that starts like it", errors.New("cluster not connected: said someone"), EventAssessmentFailed},
		{"compile error quoting the unreachable text", compile, EventRulesInvalid},
		{"compile error, wrapped", fmt.Errorf("selecting: %w", compile), EventRulesInvalid},
		{"a text that reads like a compile error", errors.New("compiling health rules: not really"), EventAssessmentFailed},
	}
	for _, c := range cases {
		hs := assessFailed(&v1alpha1.Release{}, c.err)
		kind := conditionKind(hs)
		if got := failureKind(c.err); got != c.want {
			t.Errorf("%s: failureKind = %q, want %q", c.name, got, c.want)
		}
		cond := &metav1.Condition{Reason: hs.reason, Message: truncateCondition(hs.message)}
		if prior := priorKind(cond); prior != kind {
			t.Errorf("%s: the condition %q reads back as %q, this pass's kind is %q", c.name, cond.Message, prior, kind)
		}
	}
}
