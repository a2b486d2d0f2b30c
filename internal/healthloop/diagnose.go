package healthloop

import (
	"context"
	"errors"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// diagnose lists the current Pods of obj, a failing object of the target read as the
// Release's identity, and returns its diagnosis (package diagnosis) when obj is a
// workload; nothing for other kinds, when reader cannot list, or past the pass's
// MaxDiagnosesPerPass (ok false: keep the entry's recorded diagnosis). A list that
// fails is a diagnosis that says so (the target's answer only as its code and reason,
// clustercache.DescribeError), never the pass's failure: the entry's state comes from
// its own object.
func (h *HealthController) diagnose(ctx context.Context, pt *passTenant, reader clustercache.ObjectReader, obj *unstructured.Unstructured) (diagnosis.Diagnosis, bool) {
	gk := obj.GroupVersionKind().GroupKind()
	lister, canList := reader.(clustercache.ObjectLister)
	if !canList || !diagnosis.Applies(gk.Group, gk.Kind) {
		return diagnosis.Diagnosis{}, true
	}
	if !pt.diagnoses.take() {
		return diagnosis.Diagnosis{}, false
	}
	list := func(ctx context.Context, gvr schema.GroupVersionResource, ns string, sel labels.Selector) ([]unstructured.Unstructured, error) {
		if ns == "" { // never a LIST of every namespace
			return nil, nil
		}
		items, err := lister.List(ctx, gvr, ns, sel)
		if err != nil {
			return nil, &listError{gvr: gvr, err: err}
		}
		return items, nil
	}
	d, err := diagnosis.Diagnose(ctx, obj, list)
	if err == nil {
		return d, true
	}
	h.logFrom(ctx).V(1).Info("cannot diagnose", "object", gk.Kind+" "+obj.GetNamespace()+"/"+obj.GetName(), "error", err.Error())
	var le *listError
	if errors.As(err, &le) {
		return diagnosis.Diagnosis{Message: "cannot list " + le.gvr.Resource + ": " + clustercache.DescribeError(le.err)}, true
	}
	return diagnosis.Diagnosis{Message: "cannot list Pods: " + err.Error()}, true
}

// listError is a failed LIST of a diagnosis.
type listError struct {
	gvr schema.GroupVersionResource
	err error
}

func (e *listError) Error() string { return "listing " + e.gvr.Resource + ": " + e.err.Error() }
func (e *listError) Unwrap() error { return e.err }
