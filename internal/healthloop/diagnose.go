package healthloop

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/diagnosis"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// MaxDiagnosesPerPass bounds the failing workloads whose Pods one pass lists for their
// diagnosis (docs/design.md, "Diagnosis"): 32, so that a Release of a thousand failing
// Deployments costs at most 64 LISTs per pass. The others keep the diagnosis they had.
const MaxDiagnosesPerPass = 32

// diagnoses counts the diagnoses of one pass (passTenant.diagnoses).
type diagnoses struct{ n atomic.Int32 }

// take reports whether the pass may diagnose one more workload.
func (d *diagnoses) take() bool { return d.n.Add(1) <= MaxDiagnosesPerPass }

// errOverBound ends a diagnosis past the pass's MaxDiagnosesPerPass.
var errOverBound = errors.New("over the pass's bound of diagnoses")

// diagnose lists the current Pods of obj, a failing object of entry e read from the
// target as the Release's identity, and returns its diagnosis (package diagnosis) when
// obj is a workload; nothing for other kinds or when reader cannot list. A workload past
// the pass's MaxDiagnosesPerPass keeps its recorded diagnosis, terminal when the
// entry's last state was decided FailedFast (so a terminal failure does not flap back to
// Progressing for want of a slot); a slot is taken by the first LIST, so a workload that
// lists nothing costs none. A list that fails is a diagnosis that says so (the target's
// answer only as its code and reason, clustercache.DescribeError), never the pass's
// failure: the entry's state comes from its own object. A panic in the diagnosis (a
// defect) is a diagnosis that says so, logged, never the process's end.
func (h *HealthController) diagnose(ctx context.Context, pt *passTenant, reader clustercache.ObjectReader, e entryRef, obj *unstructured.Unstructured) (d diagnosis.Diagnosis) {
	gk := obj.GroupVersionKind().GroupKind()
	lister, canList := reader.(clustercache.ObjectLister)
	if !canList || !diagnosis.Applies(gk.Group, gk.Kind) {
		return diagnosis.Diagnosis{}
	}
	name := gk.Kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	defer func() {
		if r := recover(); r != nil {
			h.logFrom(ctx).Error(fmt.Errorf("%v", r), "diagnosis panicked", "object", name)
			d = diagnosis.Diagnosis{Message: "no diagnosis: an internal error (logged)"}
		}
	}()
	took := false
	list := func(ctx context.Context, gvr schema.GroupVersionResource, ns string, sel labels.Selector) ([]unstructured.Unstructured, error) {
		if ns == "" { // never a LIST of every namespace
			return nil, nil
		}
		if !took {
			if !pt.diagnoses.take() {
				return nil, errOverBound
			}
			took = true
		}
		items, err := lister.List(ctx, gvr, ns, sel)
		if err != nil {
			return nil, &listError{gvr: gvr, err: err}
		}
		return items, nil
	}
	d, err := diagnosis.Diagnose(ctx, obj, list)
	switch {
	case err == nil:
		return d
	case errors.Is(err, errOverBound):
		return diagnosis.Diagnosis{Message: e.diagnosis, Terminal: e.cause == string(health.CauseFailedFast)}
	}
	h.logFrom(ctx).V(1).Info("cannot diagnose", "object", name, "error", err.Error())
	var le *listError
	if errors.As(err, &le) {
		return diagnosis.Diagnosis{Message: diagnosis.Line("cannot list " + le.gvr.Resource + ": " + clustercache.DescribeError(le.err))}
	}
	return diagnosis.Diagnosis{Message: diagnosis.Line("cannot list Pods: " + err.Error())}
}

// entryRef is what diagnose keeps of the entry's last record.
type entryRef struct {
	diagnosis string
	cause     string // decidedBy.cause, "" when none
}

// listError is a failed LIST of a diagnosis.
type listError struct {
	gvr schema.GroupVersionResource
	err error
}

func (e *listError) Error() string { return "listing " + e.gvr.Resource + ": " + e.err.Error() }
func (e *listError) Unwrap() error { return e.err }
