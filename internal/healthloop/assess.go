package healthloop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/celbound"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/controller/base"
	"github.com/kumodo/convoy-observer/internal/inventory"
	"github.com/kumodo/convoy-observer/internal/rulesets"
)

// assessment is the outcome of assess for one Release.
type assessment struct {
	// entries are the recorded inventory entries with this pass's results, sorted by
	// wave then key.
	entries []itemResult
	// stale is true when the observer still owns an entry that the controller-manager
	// no longer records: the next write must drop it even if no entry is left.
	stale bool
	// inv is the inventory read from the cache (nil when there is none), own its
	// field owners.
	inv *v1alpha1.ReleaseInventory
	own *inventory.Ownership
	// renderAdvanced: an entry's renderRef differs from its assessedRenderRef.
	renderAdvanced bool
	// waveCompleted: frontierWaveCompleted.
	waveCompleted bool
	// budgetCut is the number of entries that the pass could not evaluate within its
	// budget (fair.go); budgetCutBefore: the Release's previous pass was cut too.
	budgetCut       int
	budgetCutBefore bool
	// unjudged is the number of recorded entries that no selected rule judges: no rule's
	// apiVersion and resources match the entry's (health.Evaluator.RulesApplied is 0).
	unjudged int
	// unowned is the number of the inventory's entries that no field manager owns (no
	// managedFields, or none of the entry), set when no entry is recorded: they are not
	// the controller-manager's, and the Release is not judged as empty (healthStatus).
	unowned int
}

// itemResult is the assessment of one inventory entry.
type itemResult struct {
	entry   v1alpha1.InventoryEntry // as recorded (with the prior observer fields)
	key     inventory.Key
	prior   prior
	state   v1alpha1.HealthState
	message string
	anchor  *time.Time // firstUnhealthy after this pass; nil = cleared
	cut     bool       // not evaluated: the pass's budget ran out (budgetCut)
	// decidedBy is the rule that decided a state that is not Healthy (health.Judge); nil
	// when no rule decided. rulesApplied counts the selected rules that match the entry.
	// The entries write records both (decidedBy, rulesApplied), so /health reads them
	// from the inventory.
	decidedBy    *health.Decider
	rulesApplied int32
}

// prior is an entry's state before this pass writes (docs/design.md, "Assessment" step 5).
type prior struct {
	state             v1alpha1.HealthState
	firstUnhealthy    *time.Time
	assessedRenderRef string
}

// assess evaluates the rules against every recorded entry of rel's inventory
// (docs/design.md, "Assessment"); it writes nothing: the pass applies the result
// with writeInventoryHealth (step 8) after every computation is done. An error
// means the whole Release could not be assessed: a rule set that does not compile, a
// selector that does not parse, a missing or unreachable Cluster.
func (h *HealthController) assess(ctx context.Context, rel *v1alpha1.Release, pi passInventory, cluster *v1alpha1.Cluster, clusterErr error) (*assessment, error) {
	// 1. Rules.
	global, local, err := h.collectRules(ctx, rel)
	if err != nil {
		return nil, err
	}
	// 2. Compile (once per selection and generation of its rule sets).
	h.evalOnce.Do(func() {
		if h.Evaluators == nil {
			h.Evaluators = health.NewEvaluatorCache(0)
		}
	})
	evaluator, err := h.Evaluators.Get(global, local)
	if err != nil {
		return nil, err // a *health.CompileError: assessFailed names its kind
	}
	// 3. The inventory (read once for the whole pass).
	a := &assessment{}
	if pi.err != nil {
		return nil, pi.err
	}
	if pi.inv == nil {
		return a, nil
	}
	a.inv, a.own = pi.inv, pi.own
	entries, stale := pi.own.RecordedEntries(pi.inv, inventory.FieldManagerInventory)
	a.stale = stale
	if len(entries) == 0 {
		a.unowned = unownedEntries(pi.own, pi.inv)
		return a, nil
	}
	for i := range entries {
		if evaluator.RulesApplied(entries[i].APIVersion(), entries[i].Resource) == 0 {
			a.unjudged++
		}
	}
	// 4. The target cluster.
	if clusterErr != nil {
		return nil, clusterErr
	}
	reader, err := h.Clusters.GetReader(ctx, cluster)
	if err != nil {
		return nil, err
	}
	// 5. Prior states and anchors, before this pass writes.
	priors := priorAndAnchors(entries)
	// 6. Each entry.
	results, err := h.assessItems(ctx, rel, evaluator, reader, entries, priors)
	if err != nil {
		return nil, err
	}
	a.entries = results
	a.budgetCut, a.budgetCutBefore = h.countCut(rel.Namespace, base.KeyOf(rel), results)
	// 7. Render advanced.
	for i := range results {
		if results[i].entry.RenderRef != results[i].prior.assessedRenderRef {
			a.renderAdvanced = true
		}
	}
	a.waveCompleted = frontierWaveCompleted(results)
	// 8. The pass writes the result (writeInventoryHealth).
	return a, nil
}

// collectRules lists the GlobalHealthRuleSets and the HealthRuleSets of rel's namespace
// and keeps those its selectors select (docs/design.md, "Selection").
func (h *HealthController) collectRules(ctx context.Context, rel *v1alpha1.Release) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet, error) {
	return rulesets.Collect(ctx, h.Reader, rel)
}

// priorAndAnchors returns each entry's state, firstUnhealthy and assessedRenderRef as
// the inventory holds them before this pass writes.
func priorAndAnchors(entries []v1alpha1.InventoryEntry) map[inventory.Key]prior {
	out := make(map[inventory.Key]prior, len(entries))
	for i := range entries {
		p := prior{state: entries[i].State, assessedRenderRef: entries[i].AssessedRenderRef}
		if entries[i].FirstUnhealthy != nil {
			t := entries[i].FirstUnhealthy.Time
			p.firstUnhealthy = &t
		}
		out[inventory.KeyOf(&entries[i])] = p
	}
	return out
}

// assessItems runs assessItem for every entry, at most ReadConcurrency at a time. It
// fails only when the target cluster stops answering.
func (h *HealthController) assessItems(ctx context.Context, rel *v1alpha1.Release, ev *health.Evaluator, reader clustercache.ObjectReader, entries []v1alpha1.InventoryEntry, priors map[inventory.Key]prior) ([]itemResult, error) {
	deadline, hasDeadline := rel.GetDeadline()
	var dl *time.Duration
	if hasDeadline {
		dl = &deadline
	}
	return h.assessItemsWith(ctx, h.newPassTenant(rel.Namespace), ev, reader, entries, priors, dl, h.Clock.Now())
}

// assessItemsWith is assessItems with the pass's tenant (its evaluations' namespace,
// budget and place in the fair evaluation; nil: a pass of the namespace ""), the
// deadline and the time given.
func (h *HealthController) assessItemsWith(ctx context.Context, pt *passTenant, ev *health.Evaluator, reader clustercache.ObjectReader, entries []v1alpha1.InventoryEntry, priors map[inventory.Key]prior, dl *time.Duration, now time.Time) ([]itemResult, error) {
	if pt == nil {
		pt = h.newPassTenant("")
	}
	results := make([]itemResult, len(entries))
	g, gctx := errgroup.WithContext(ctx)
	limit := h.ReadConcurrency
	if limit < 1 {
		limit = DefaultReadConcurrency
	}
	g.SetLimit(limit)
	for i := range entries {
		g.Go(func() error {
			k := inventory.KeyOf(&entries[i])
			r, err := h.assessItem(gctx, pt, ev, reader, &entries[i], priors[k], dl, now)
			if err != nil {
				return err
			}
			results[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(results, func(a, b itemResult) int {
		return health.CompareEntries(a.position(), b.position())
	})
	return results, nil
}

// assessItem gives one state for one inventory entry (docs/design.md, "Per-entry
// evaluation"). It returns an error only when the cluster does not answer or ctx ends; a
// missing or unreadable object is Unknown with a message that says why, and so is one
// that the pass could not evaluate within its budget (budgetCut).
func (h *HealthController) assessItem(ctx context.Context, pt *passTenant, ev *health.Evaluator, reader clustercache.ObjectReader, e *v1alpha1.InventoryEntry, p prior, deadline *time.Duration, now time.Time) (itemResult, error) {
	r := itemResult{entry: *e, key: inventory.KeyOf(e), prior: p, rulesApplied: rulesApplied(ev, e)}
	var res health.Result
	gvr := schema.GroupVersionResource{Group: e.Group, Version: e.Version, Resource: e.Resource}
	switch refErr := inventory.CheckReference(gvr, e.Namespace, e.Name); {
	case refErr != nil:
		res = health.Result{Outcome: health.Error, Message: health.TruncateMessage("cannot read object: " + refErr.Error()), RuleIndex: -1}
	default:
		obj, err := reader.Get(ctx, gvr, e.Namespace, e.Name)
		switch {
		case err == nil:
			var evalErr error
			if res, evalErr = h.evaluate(ctx, pt, ev, e.APIVersion(), e.Resource, obj.Object); evalErr != nil {
				if errors.Is(evalErr, celbound.ErrBudgetExhausted) {
					return h.budgetCut(r), nil
				}
				return r, evalErr // ctx ended: the pass writes nothing
			}
		case isUnservedResource(err):
			res = health.Result{Outcome: health.Error, RuleIndex: -1, Message: health.TruncateMessage(fmt.Sprintf(
				"cannot read object: the target does not serve %s (version %q, resource %q)", gvr.GroupResource(), gvr.Version, gvr.Resource))}
		case apierrors.IsNotFound(err):
			res = health.Result{Outcome: health.Error, Message: "object not found", RuleIndex: -1}
		case errors.Is(err, clustercache.ErrClusterNotConnected):
			return r, err
		default:
			// The target's answer reaches the message only as its code and reason, or a
			// fixed class of failure (clustercache.DescribeError); the log keeps it all.
			h.logFrom(ctx).V(1).Info("cannot read object", "object", r.key.String(), "error", err.Error())
			res = health.Result{Outcome: health.Error, Message: health.TruncateMessage("cannot read object: " + clustercache.DescribeError(err)), RuleIndex: -1}
		}
	}
	j := health.Judge(res, p.firstUnhealthy, deadline, now)
	state := j.State
	r.state, r.message, r.anchor, r.decidedBy = state, res.Message, j.FirstUnhealthy, j.DecidedBy
	if state == v1alpha1.StateHealthy {
		r.message = ""
	}
	if state != v1alpha1.StateHealthy && state != v1alpha1.StateUnknown {
		h.logFrom(ctx).V(1).Info("object not healthy", "object", r.key.String(), "state", state, "message", r.message, "ruleSet", res.RuleSet, "rule", res.RuleIndex)
	}
	return r, nil
}

// unownedEntries counts the entries of inv that no field manager owns: neither a
// controller-manager (they would be recorded) nor the observer (they would be a leftover
// that its next apply drops). An inventory stored without managedFields (created with
// an Update or a Create that tracks none, or whose managedFields were reset) has only
// such entries.
func unownedEntries(own *inventory.Ownership, inv *v1alpha1.ReleaseInventory) int {
	n := 0
	for i := range inv.Entries {
		k := inventory.KeyOf(&inv.Entries[i])
		if !own.EntryRecorded(k) && !own.EntryOwnedBy(inventory.FieldManagerInventory, k) {
			n++
		}
	}
	return n
}

// rulesApplied is how many of ev's rules match e's apiVersion and resource (no
// evaluation, nothing charged), bounded to an int32 for the inventory's rulesApplied.
func rulesApplied(ev *health.Evaluator, e *v1alpha1.InventoryEntry) int32 {
	return int32(min(ev.RulesApplied(e.APIVersion(), e.Resource), math.MaxInt32))
}

// position is where the entry stands in the order of a pass (health.CompareEntries).
func (r *itemResult) position() health.EntryPosition {
	return health.EntryPosition{Wave: r.entry.GetWave(), Group: r.key.Group, Kind: r.key.Kind, Namespace: r.key.Namespace, Name: r.key.Name}
}

// isUnservedResource tells a 404 for an unknown resource type (the API server names no
// object) from a 404 for a missing object.
func isUnservedResource(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

// frontierWaveCompleted reports whether every entry of the highest wave is Healthy now
// and one or more of them was not Healthy before this pass (docs/design.md, "Wake the controller").
func frontierWaveCompleted(results []itemResult) bool {
	if len(results) == 0 {
		return false
	}
	frontier := results[0].entry.GetWave()
	for i := range results {
		frontier = max(frontier, results[i].entry.GetWave())
	}
	changed := false
	for i := range results {
		if results[i].entry.GetWave() != frontier {
			continue
		}
		if results[i].state != v1alpha1.StateHealthy {
			return false
		}
		if results[i].prior.state != v1alpha1.StateHealthy {
			changed = true
		}
	}
	return changed
}
