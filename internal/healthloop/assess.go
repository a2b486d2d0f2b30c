package healthloop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/celbound"
	"github.com/kumodo/convoy-observer/health/diagnosis"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// assessment is the judged observation of one Release's entries (judge).
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
	// ruleSet and rule name the rule of the engine's result, for the log (rule -1: none).
	ruleSet string
	rule    int
	// diagnosis is why a failing workload fails, from its Pods (docs/design.md,
	// "Diagnosis"); "" for a Healthy entry and for one without.
	diagnosis string
}

// prior is an entry's state before this pass writes (docs/design.md, "Assessment" step 5).
type prior struct {
	state             v1alpha1.HealthState
	firstUnhealthy    *time.Time
	assessedRenderRef string
}

// observation is what a pass read of one Release's entries: the inventory, which entries
// the controller-manager records, and for each the engine's result on its object (a read
// that failed is a result too). Nothing in it is judged yet: decide judges it.
type observation struct {
	inv *v1alpha1.ReleaseInventory
	own *inventory.Ownership
	// stale, unowned and unjudged: as in assessment.
	stale    bool
	unowned  int
	unjudged int
	// entries, sorted by wave then key.
	entries []entryObservation
}

// entryObservation is what a pass read and evaluated of one inventory entry.
type entryObservation struct {
	entry        v1alpha1.InventoryEntry // as recorded (with the prior observer fields)
	key          inventory.Key
	prior        prior
	rulesApplied int32
	// res is the engine's result on the object, or the read's failure as an Error
	// result; unset when cut.
	res health.Result
	// cut: not evaluated, the pass's budget ran out.
	cut bool
	// diagnosis of a failing workload (diagnose); empty otherwise.
	diagnosis diagnosis.Diagnosis
}

// position is where the entry stands in the order of a pass (health.CompareEntries).
func (o *entryObservation) position() health.EntryPosition {
	return health.EntryPosition{Wave: o.entry.GetWave(), Group: o.key.Group, Kind: o.key.Kind, Namespace: o.key.Namespace, Name: o.key.Name}
}

// observeEntries reads and evaluates every recorded entry of rel's inventory
// (docs/design.md, "Assessment", steps 1 to 6); it judges nothing and writes nothing:
// decide judges the observation, and the pass applies the result with
// writeInventoryHealth after every computation is done. An error means the whole
// Release could not be assessed: a rule set that does not compile, a selector that does
// not parse, a missing or unreachable Cluster.
func (h *HealthController) observeEntries(ctx context.Context, rel *v1alpha1.Release, pi passInventory, cluster *v1alpha1.Cluster, clusterErr error) (*observation, error) {
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
	o := &observation{}
	if pi.err != nil {
		return nil, pi.err
	}
	if pi.inv == nil {
		return o, nil
	}
	o.inv, o.own = pi.inv, pi.own
	entries, stale := pi.own.RecordedEntries(pi.inv, inventory.FieldManagerInventory)
	o.stale = stale
	if len(entries) == 0 {
		o.unowned = unownedEntries(pi.own, pi.inv)
		return o, nil
	}
	for i := range entries {
		if evaluator.RulesApplied(entries[i].APIVersion(), entries[i].Resource) == 0 {
			o.unjudged++
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
	// The cache must keep what the rules read of these types before they are read.
	if err := h.keepFields(ctx, evaluator, entries); err != nil {
		return nil, err
	}
	// 5. Prior states and anchors, before this pass writes.
	priors := priorAndAnchors(entries)
	// 6. Each entry.
	if o.entries, err = h.observeItems(ctx, h.newPassTenant(rel.Namespace), evaluator, reader, entries, priors); err != nil {
		return nil, err
	}
	return o, nil
}

// collectRules lists the GlobalHealthRuleSets and the HealthRuleSets of rel's namespace
// from the manager's cache and keeps those that rel's selectors select (docs/design.md,
// "Selection"; "Assessment" step 1), sorted by name as health.SelectRuleSets returns
// them. A nil selector lists nothing; a Release without spec.healthAssessment selects
// nothing. The error names what could not be listed, or the invalid selector.
//
// The sets are not deep-copied out of the cache (every pass of every Release lists
// them, and with the rule library selected that is about 70 sets and hundreds of
// rules): they share their content with the cache and must not be modified.
// health.EvaluatorCache and health.NewEvaluator only read them.
func (h *HealthController) collectRules(ctx context.Context, rel *v1alpha1.Release) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet, error) {
	ha := rel.Spec.HealthAssessment
	if ha == nil {
		return nil, nil, nil
	}
	var globals extv1alpha1.GlobalHealthRuleSetList
	if ha.GlobalRuleSetSelector != nil {
		if err := h.Reader.List(ctx, &globals, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("listing GlobalHealthRuleSets: %w", err)
		}
	}
	var locals extv1alpha1.HealthRuleSetList
	if ha.LocalRuleSetSelector != nil {
		if err := h.Reader.List(ctx, &locals, client.InNamespace(rel.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("listing HealthRuleSets of namespace %s: %w", rel.Namespace, err)
		}
	}
	g, l, err := health.SelectRuleSets(globals.Items, locals.Items, ha.GlobalRuleSetSelector, ha.LocalRuleSetSelector, rel.Namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("selecting health rule sets: %w", err)
	}
	return g, l, nil
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

// observeItems observes every entry, with the pass's tenant (its evaluations' namespace,
// budget and place in the fair evaluation; nil: a pass of the namespace ""), and sorts
// the observations by wave then key. An entry whose object the reader holds in memory
// (clustercache.CachedReader) is read and evaluated on the pass's goroutine, in order;
// the others (observeItem) and the diagnoses of failing objects run on goroutines, at
// most ReadConcurrency at a time, so that only the reads that wait on the cluster
// overlap (a goroutine per cached entry costs more than its read: its stack grows
// through the JSON decoder). It fails only when the target cluster stops answering or
// ctx ends.
func (h *HealthController) observeItems(ctx context.Context, pt *passTenant, ev *health.Evaluator, reader clustercache.ObjectReader, entries []v1alpha1.InventoryEntry, priors map[inventory.Key]prior) ([]entryObservation, error) {
	if pt == nil {
		pt = h.newPassTenant("")
	}
	results := make([]entryObservation, len(entries))
	g, gctx := errgroup.WithContext(ctx)
	limit := h.ReadConcurrency
	if limit < 1 {
		limit = DefaultReadConcurrency
	}
	g.SetLimit(limit)
	cached, _ := reader.(clustercache.CachedReader)
	var inline error
	for i := range entries {
		e := &entries[i]
		p := priors[inventory.KeyOf(e)]
		if obj := cachedEntryObject(cached, e); obj != nil {
			o, err := h.evaluateItem(gctx, pt, ev, e, p, obj)
			if err != nil {
				inline = err
				break
			}
			results[i] = o
			if o.res.Outcome == health.Fail {
				g.Go(func() error {
					results[i].diagnosis = h.diagnose(gctx, pt, reader, failingRef(e), obj)
					return nil
				})
			}
			continue
		}
		g.Go(func() error {
			r, err := h.observeItem(gctx, pt, ev, reader, e, p)
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
	if inline != nil {
		return nil, inline
	}
	slices.SortStableFunc(results, func(a, b entryObservation) int {
		return health.CompareEntries(a.position(), b.position())
	})
	return results, nil
}

// cachedEntryObject returns the object of entry e when cached holds it in memory (nil
// cached, a reference that CheckReference refuses, or an object not held: nil, and
// ReadEntryObject reads it or says why not).
func cachedEntryObject(cached clustercache.CachedReader, e *v1alpha1.InventoryEntry) *unstructured.Unstructured {
	if cached == nil {
		return nil
	}
	gvr := schema.GroupVersionResource{Group: e.Group, Version: e.Version, Resource: e.Resource}
	if inventory.CheckReference(gvr, e.Namespace, e.Name) != nil {
		return nil
	}
	obj, ok := cached.GetCached(gvr, e.Namespace, e.Name)
	if !ok {
		return nil
	}
	return obj
}

// observeItem reads one inventory entry's object, evaluates the rules on it and
// diagnoses it when it fails (docs/design.md, "Per-entry evaluation"). It returns an
// error only when the cluster does not answer or ctx ends; a reference that is refused,
// a missing or unreadable object is an Error result whose message says why (the
// target's answer only as its code and reason, clustercache.DescribeError), and an
// entry that the pass could not evaluate within its budget is cut.
func (h *HealthController) observeItem(ctx context.Context, pt *passTenant, ev *health.Evaluator, reader clustercache.ObjectReader, e *v1alpha1.InventoryEntry, p prior) (entryObservation, error) {
	obj, failure, err := ReadEntryObject(ctx, reader, e, h.logFrom(ctx))
	switch {
	case err != nil:
		return entryObservation{}, err
	case failure != "":
		o := newEntryObservation(ev, e, p)
		o.res = health.Result{Outcome: health.Error, Message: health.TruncateMessage(failure), RuleIndex: -1}
		return o, nil
	}
	o, err := h.evaluateItem(ctx, pt, ev, e, p, obj)
	if err != nil {
		return o, err
	}
	if o.res.Outcome == health.Fail {
		o.diagnosis = h.diagnose(ctx, pt, reader, failingRef(e), obj)
	}
	return o, nil
}

// newEntryObservation is the observation of entry e before its object is read.
func newEntryObservation(ev *health.Evaluator, e *v1alpha1.InventoryEntry, p prior) entryObservation {
	return entryObservation{entry: *e, key: inventory.KeyOf(e), prior: p, rulesApplied: rulesApplied(ev, e)}
}

// evaluateItem evaluates the rules on obj, the object of entry e; an entry that the pass
// could not evaluate within its budget is cut. It fails only when ctx ends. A failing
// object's diagnosis is the caller's (diagnose).
func (h *HealthController) evaluateItem(ctx context.Context, pt *passTenant, ev *health.Evaluator, e *v1alpha1.InventoryEntry, p prior, obj *unstructured.Unstructured) (entryObservation, error) {
	o := newEntryObservation(ev, e, p)
	res, evalErr := h.evaluate(ctx, pt, ev, e.APIVersion(), e.Resource, obj.Object)
	if errors.Is(evalErr, celbound.ErrBudgetExhausted) {
		o.cut = true
		return o, nil
	}
	if evalErr != nil {
		return o, evalErr // ctx ended: the pass writes nothing
	}
	o.res = res
	return o, nil
}

// failingRef is what diagnose keeps of the last record of e, an entry whose object fails.
func failingRef(e *v1alpha1.InventoryEntry) entryRef {
	ref := entryRef{diagnosis: e.Diagnosis}
	if e.DecidedBy != nil {
		ref.cause = e.DecidedBy.Cause
	}
	return ref
}

// ReadEntryObject reads the object of inventory entry e from reader, the one read step
// of the loop's observeItem and of convoyctl health eval --release (docs/design.md,
// "Per-entry evaluation"). It returns the object; or, for an entry that cannot be read,
// the message of its Unknown result ("object not found", "cannot read object: …": a
// reference that is refused, a type the target does not serve, any other answer of the
// target only as its code and reason, clustercache.DescribeError, the whole error going
// to log); or an error when the cluster does not answer (wrapping
// clustercache.ErrClusterNotConnected) or ctx ended.
func ReadEntryObject(ctx context.Context, reader clustercache.ObjectReader, e *v1alpha1.InventoryEntry, log logr.Logger) (*unstructured.Unstructured, string, error) {
	gvr := schema.GroupVersionResource{Group: e.Group, Version: e.Version, Resource: e.Resource}
	if refErr := inventory.CheckReference(gvr, e.Namespace, e.Name); refErr != nil {
		return nil, "cannot read object: " + refErr.Error(), nil //nolint:nilerr // a refused reference is the entry's Unknown result, not the pass's error
	}
	obj, err := reader.Get(ctx, gvr, e.Namespace, e.Name)
	switch {
	case err == nil:
		return obj, "", nil
	case isUnservedResource(err):
		return nil, fmt.Sprintf("cannot read object: the target does not serve %s (version %q, resource %q)", gvr.GroupResource(), gvr.Version, gvr.Resource), nil
	case apierrors.IsNotFound(err):
		return nil, "object not found", nil
	case errors.Is(err, clustercache.ErrClusterNotConnected):
		return nil, "", err
	default:
		log.V(1).Info("cannot read object", "object", inventory.KeyOf(e).String(), "error", err.Error())
		return nil, "cannot read object: " + clustercache.DescribeError(err), nil
	}
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
