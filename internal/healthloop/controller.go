package healthloop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/controller/base"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// Waker wakes the controller-manager for one Release: POST …/releases/<name>/sync.
type Waker interface {
	RequestSync(ctx context.Context, namespace, name string) error
}

// DefaultReadConcurrency bounds the concurrent reads of target objects in one pass.
const DefaultReadConcurrency = 16

// HealthController is the health loop. Its fields are its seams: tests set Clock, Rand
// and Waker, and drive syncHandler directly.
type HealthController struct {
	// Reader reads Releases, ReleaseInventories, Clusters and rule sets; the manager's
	// cache in production.
	Reader client.Reader
	// LiveReader reads from the API server (a client without a cache): the Release's
	// sync annotation when a pass records an owed sync request. nil uses Reader.
	LiveReader client.Reader
	// Writer applies the observer's fields with Server-Side Apply.
	Writer client.Client
	// Clusters hands out a reader per target Cluster.
	Clusters clustercache.ClusterClients
	// Shards is the shard gate of this replica.
	Shards *base.ShardGate
	// Waker sends the sync request; nil disables wake-ups (logged once per edge).
	Waker Waker
	// Clock is the time source of anchors, deadlines and hook timeouts.
	Clock clock.PassiveClock
	// Rand returns a number in [0, 1) for the re-check jitter.
	Rand func() float64
	// ReadConcurrency bounds concurrent target reads per pass.
	ReadConcurrency int
	// Log is the loop's logger.
	Log logr.Logger
	// Evaluators caches the compiled rules of each selection of rule sets across
	// passes and Releases; nil gets one on first use.
	Evaluators *health.EvaluatorCache
	evalOnce   sync.Once
	// Enqueue adds a Release key to the loop's queue; SetupWithManager sets it. Changes
	// of target objects wake the Releases that read them through it (nil: no wake-ups).
	Enqueue func(key string)
	// Events records the loop's Kubernetes Events (events.k8s.io/v1) on Releases and
	// Clusters, on edges only (events.go); nil records none.
	Events EventRecorder
	// events is the memory of cluster edges and the per-Cluster Event budget.
	events eventState

	// targets maps target objects to the Releases that read them.
	targets targetIndex

	// Fair configures the budget of a pass and the fair evaluation across namespaces
	// (fair.go); NewHealthController sets DefaultPassBudget.
	Fair FairOptions
	fair fairState

	mu sync.Mutex
	// attempts holds, per Release key, the attempt count of each pending target
	// (in memory, lost at a restart: docs/design.md, "Re-check backoff").
	attempts map[string]map[string]int
	// lastShard remembers the shard of each Cluster (namespace/name) seen by this
	// replica, for the shard gate of Releases whose Cluster was deleted; it goes with
	// the last Release of that Cluster (forgetCluster).
	lastShard map[string]string
	// clusterOf holds the Cluster (namespace/name) of each Release key this replica
	// passed, and clusterRefs how many Releases name each Cluster: the memory of a
	// Cluster (lastShard, its Event budget and outage) lives as long as one of them.
	clusterOf   map[string]string
	clusterRefs map[string]int
	// wakePending marks keys whose sync request failed, so the next pass sends it
	// again even though the edge that caused it has passed.
	wakePending map[string]bool
	// owed holds, per Release key, what this process knows about the inventory's record
	// of an owed sync request (owed.go).
	owed map[string]owedState
	// written holds, per Release key, the Healthy condition this process last applied
	// (writeHealth), which a lagging cache may not show yet.
	written map[string]writtenHealth
	// entriesWritten holds, per Release key, a digest of the entries this process last
	// applied (writeInventoryHealth).
	entriesWritten map[string]uint64
}

// NewHealthController returns a loop with the real clock and default settings.
func NewHealthController(reader client.Reader, writer client.Client, clusters clustercache.ClusterClients, shards *base.ShardGate, waker Waker) *HealthController {
	return &HealthController{
		Reader:          reader,
		Writer:          writer,
		Clusters:        clusters,
		Shards:          shards,
		Waker:           waker,
		Clock:           clock.RealClock{},
		Rand:            rand.Float64,
		ReadConcurrency: DefaultReadConcurrency,
		Log:             ctrl.Log.WithName("health"),
		Fair:            FairOptions{PassBudget: DefaultPassBudget},
	}
}

// SetupWithManager registers the loop with mgr as the controller-runtime controller
// "health" (base.ControllerOptions: workers concurrent passes, the loop's own rate
// limiter, panics recovered, leader election). Its watches add the keys of docs/design.md,
// "Events that add a key": Releases and ReleaseInventories (filtered by
// base.ReleasePredicate and base.InventoryPredicate), rule sets and Clusters (fanned out
// to their Releases, Clusters through the Release-by-Cluster field index); changes of
// target objects and rebuilt clusters (a rotated kubeconfig Secret) come through
// Enqueue. It returns the reconciler, whose Sync tests may wrap before mgr starts.
func (h *HealthController) SetupWithManager(ctx context.Context, mgr manager.Manager, workers int) (*base.Reconciler, error) {
	if err := base.IndexReleasesByCluster(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	fan := base.ReleaseFanOut{Reader: mgr.GetCache(), Log: h.Log}
	enq := &base.Enqueuer{}
	h.Enqueue = enq.Enqueue
	if t, ok := h.Clusters.(clustercache.TargetTracker); ok {
		// A changed target object wakes the Releases that read it; a rotated kubeconfig
		// Secret wakes every Release of its Cluster.
		t.Notify(h.targetChanged, func(namespace, name string) { enq.Add(fan.Releases(ctx, namespace, name)...) })
	}
	opts := base.ControllerOptions(workers)
	opts.RateLimiter = h.rateLimiter(opts.RateLimiter)
	opts.Logger = h.Log
	// Keys are served round-robin across namespaces (fair.go).
	opts.NewQueue = base.NewFairQueue(base.FairQueueOptions{Weight: h.Fair.Weight, Waited: observeQueueWait})
	r := &base.Reconciler{Sync: h.syncHandler}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("health").
		For(&v1alpha1.Release{}, builder.WithPredicates(base.ReleasePredicate())).
		Watches(&v1alpha1.ReleaseInventory{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(base.InventoryPredicate())).
		Watches(&extv1alpha1.GlobalHealthRuleSet{}, handler.EnqueueRequestsFromMapFunc(fan.All)).
		Watches(&extv1alpha1.HealthRuleSet{}, handler.EnqueueRequestsFromMapFunc(fan.InNamespace)).
		Watches(&v1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(fan.OfCluster), builder.WithPredicates(base.ClusterPredicate())).
		WatchesRawSource(enq.Source()).
		WithOptions(opts).
		Complete(r)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// rateLimiter caps the retry delays of rl at each Release's syncPolicy.interval when
// that is shorter than base.RetryMaxDelay (32s, the longest re-check delay): a failed
// write is never retried later than the next re-check would have come.
func (h *HealthController) rateLimiter(rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimiter[reconcile.Request] {
	return base.WithMaxDelay(rl, func(req reconcile.Request) time.Duration {
		rel := &v1alpha1.Release{}
		// From the cache (no request to the API server); a Release it does not hold keeps
		// base.RetryMaxDelay.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := h.Reader.Get(ctx, req.NamespacedName, rel); err != nil {
			return 0
		}
		interval, _ := rel.GetInterval()
		return interval
	})
}

// syncHandler does one pass for the Release key namespace/name (docs/design.md,
// "One pass"). It computes first and writes last: it polls the hooks and assesses the
// entries without writing, then applies the hooks, the entries and the Healthy
// condition in that order, each write carrying the resourceVersion that the previous
// one produced, and only then sends the sync request. Reads of target objects are
// judged (they land in the condition and the inventory); every failed write of the
// observer's own fields and a failed sync request are returned, so the queue retries
// the key with its rate limit. A write that lost a precondition race, and a pass cut off
// by shutdown, are base.Quiet: retried without an error-level line. A cancelled pass
// writes nothing.
func (h *HealthController) syncHandler(ctx context.Context, key string) (_ base.Result, err error) {
	log := h.Log.WithValues("release", key)
	ctx = logr.NewContext(ctx, log)
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = base.Quiet(fmt.Errorf("pass stopped: %w", err))
		}
	}()
	namespace, name, ok := strings.Cut(key, "/")
	if !ok {
		return base.Result{}, reconcile.TerminalError(fmt.Errorf("malformed key %q", key))
	}
	passesTotal.WithLabelValues(namespace).Inc()

	// 1. The Release, from the cache.
	rel := &v1alpha1.Release{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rel); err != nil {
		if apierrors.IsNotFound(err) {
			h.forget(key)
			h.forgetCluster(key)
			forgetMetrics(namespace, name)
			return base.Result{}, nil // the controller-manager deletes the inventory
		}
		return base.Result{}, fmt.Errorf("reading Release %s: %w", key, err)
	}
	rel = rel.DeepCopy()

	// 2. Shard gate.
	cluster, clusterErr := h.getCluster(ctx, rel)
	shard := h.shardOf(rel, cluster)
	if !h.Shards.Owns(shard) {
		log.V(1).Info("skipping: the Cluster's shard belongs to another replica", "cluster", rel.Spec.ClusterRef.Name, "shard", shard)
		h.forget(key)
		forgetMetrics(namespace, name) // the owner of the shard exports them now
		return base.Result{}, nil
	}

	// The inventory, read once for the hooks and the assessment of this pass.
	inv, err := h.readInventory(ctx, rel)
	if err != nil {
		return base.Result{}, err
	}
	h.trackTargets(key, rel, cluster, inv)

	// 3. Deletion: only hooks.
	if rel.DeletionTimestamp != nil {
		hooks := h.pollHooks(ctx, rel, inv, cluster, clusterErr)
		e := edges{hooksFinished: hooks.finished}
		if err := h.commit(ctx, rel, inv, hooks, nil, nil, e); err != nil {
			return base.Result{}, err
		}
		return h.scheduleHealthRecheck(key, rel, hooks.pendingTargets()), nil
	}

	// 4. Hooks.
	hooks := h.pollHooks(ctx, rel, inv, cluster, clusterErr)

	// 5. Health.
	var a *assessment
	var hs healthStatus
	var pending []string
	var e edges
	if rel.Spec.HealthAssessment == nil {
		hs = notConfigured(rel)
	} else {
		var err error
		if a, err = h.assess(ctx, rel, inv, cluster, clusterErr); err != nil {
			if ctx.Err() == nil {
				log.Info("assessment failed", "reason", err.Error())
				assessmentFailures.WithLabelValues(rel.Namespace, rel.Name).Inc()
			}
			hs = assessFailed(rel, err)
			pending = append(pending, targetAssessment)
		} else {
			hs = a.healthStatus(rel)
			pending = append(pending, a.pendingTargets(hs)...)
			e = edges{waveCompleted: a.waveCompleted, renderAdvanced: a.renderAdvanced}
		}
	}
	e.hooksFinished = hooks.finished
	pending = append(pending, hooks.pendingTargets()...)

	// Writes, then 6. wake the controller.
	if err := h.commit(ctx, rel, inv, hooks, a, &hs, e); err != nil {
		return base.Result{}, err
	}
	h.recordBudgetEvent(rel, a)

	// 7. Next pass.
	return h.scheduleHealthRecheck(key, rel, pending), nil
}

// commit is the write half of a pass: the hooks' status, the entries' health and the
// Healthy condition (hs nil: none, during deletion), then the sync request when the pass
// has an edge or owes one. The debt is recorded in the inventory by the first write that
// persists the edge's state, and removed after the request succeeded (owed.go), so a
// pass that fails, or a process that dies, after persisting a finished hook or a
// completed wave still sends the request later, although the edge itself does not come
// back. A cancelled context writes nothing.
func (h *HealthController) commit(ctx context.Context, rel *v1alpha1.Release, inv passInventory, hooks hookOutcome, a *assessment, hs *healthStatus, e edges) error {
	if err := ctx.Err(); err != nil {
		return err // shutdown: what this pass computed from cut-off reads is not the truth
	}
	key := base.KeyOf(rel)
	st := h.owedFor(key, rel, inv)
	// A record this process has paid already (its removal failed, or the cache has not
	// seen the removal yet) is only removed, not paid again.
	if e.any() || (st.value != "" && !st.paid) {
		h.armWake(key)
	}
	// carry is the record that the pass's applies send: the unpaid one, or a new one
	// when the pass persists the state of an edge (a completed wave or an advanced render
	// always changes entries; a finished hook changes the hooks unless it is a re-poll in
	// its arming second that found the same outcome). Without a Waker there is nobody to
	// owe.
	carry := ""
	var err error
	if st.value != "" && !st.paid {
		carry = st.value
	}
	persists := e.waveCompleted || e.renderAdvanced || (e.hooksFinished > 0 && hooks.status != nil)
	if persists && carry == "" && inv.inv != nil && h.Waker != nil {
		if carry, err = h.newOwedValue(ctx, rel); err != nil {
			return h.writeFailed(ctx, "sync-owed", err) // a Release deleted meanwhile: quiet
		}
		st = owedState{value: carry}
		h.setOwed(key, st)
	}
	prev := priorCondition(rel)
	rv := inv.resourceVersion()
	// The hooks and the entries are independent: a failed hooks write does not hold back
	// the entries and the condition. It still fails the pass, after them, so the hook
	// state is retried; the sync request waits for it (it would announce a hook state
	// that did not land), and the debt stays armed for the retry.
	var hooksErr error
	if rv, err = h.writeHookStatus(ctx, inv.inv, rv, hooks, carry); err != nil {
		hooksErr = h.writeFailed(ctx, "hooks", err)
	} else {
		h.recordHookEvents(rel, hooks)
	}
	if a != nil {
		if rv, err = h.writeInventoryHealth(ctx, a, rv, carry); err != nil {
			if tooLarge(err) && hs != nil {
				// Retrying alone would hide why: say it in the condition too.
				_ = h.writeHealth(ctx, rel, assessFailed(rel, fmt.Errorf("cannot record the health of %d entries: the ReleaseInventory exceeds the API server's size limit: %w", len(a.entries), err)))
			}
			return failedWrites(hooksErr, h.writeFailed(ctx, "entries", err))
		}
	}
	if hs != nil {
		if err := h.writeHealth(ctx, rel, *hs); err != nil {
			return failedWrites(hooksErr, h.writeFailed(ctx, "status", err))
		}
		h.recordHealthEvents(ctx, rel, prev, *hs, a)
	}
	if hooksErr != nil {
		return hooksErr
	}
	sent, err := h.wake(ctx, rel, e)
	if err != nil {
		return err
	}
	if st.value == "" {
		return nil
	}
	if sent && !st.paid {
		// A record with a baseline now reads as paid from the Release: nothing to remove.
		_, withBaseline := paidSince(rel, st.value)
		st.paid, st.settled = true, withBaseline
		h.setOwed(key, st)
	}
	if st.paid && !st.settled {
		// An older observer's record: removed, the last write of the pass.
		if err := h.removeSyncOwed(ctx, inv.inv, st.value); err != nil {
			return h.writeFailed(ctx, "sync-owed", err)
		}
		st.settled = true
		h.setOwed(key, st)
	}
	return nil
}

// writeFailed returns the error of a failed write for the queue. A conflict with the
// inventory's uid or resourceVersion precondition (the cache lagged behind the
// controller-manager, or it deleted the inventory) and a NotFound (the object is gone)
// are expected: counted, logged at V(1), and retried quietly once the cache catches up.
func (h *HealthController) writeFailed(ctx context.Context, write string, err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		writeConflicts.WithLabelValues(write).Inc()
		h.logFrom(ctx).V(1).Info("write lost a precondition race; retrying", "write", write, "reason", err.Error())
		return base.Quiet(err)
	}
	return err
}

// failedWrites joins the errors of the failed writes of one pass; the result is
// base.Quiet only when each of them is (a lost precondition race), so a real failure is
// never logged at V(1) only.
func failedWrites(errs ...error) error {
	var all []error
	quiet := true
	for _, err := range errs {
		if err == nil {
			continue
		}
		all = append(all, err)
		quiet = quiet && base.IsQuiet(err)
	}
	switch {
	case len(all) == 0:
		return nil
	case len(all) == 1:
		return all[0]
	case quiet:
		return base.Quiet(errors.Join(all...))
	}
	for i, err := range all {
		if base.IsQuiet(err) {
			all[i] = errors.Unwrap(err) // Quiet(err) wraps err itself
		}
	}
	return errors.Join(all...)
}

// tooLarge reports whether err says that the written object exceeds the size limit of
// the API server (413 RequestEntityTooLarge) or of etcd: a 500 InternalError Status
// whose message carries etcd's own error, etcdRequestTooLarge (the API server passes
// etcd's error on as text; no reason or code of the Status tells it apart).
func tooLarge(err error) bool {
	if apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInternalError(err) {
		return false
	}
	return strings.Contains(status.Status().Message, etcdRequestTooLarge)
}

// etcdRequestTooLarge is etcd's rpctypes.ErrRequestTooLarge as the API server reports
// it (a test checks it against etcd's constant).
const etcdRequestTooLarge = "etcdserver: request is too large"

// passInventory is rel's ReleaseInventory as one pass sees it: read once from the cache,
// with its field owners parsed once.
type passInventory struct {
	// inv is nil when there is no inventory.
	inv *v1alpha1.ReleaseInventory
	// own is nil when the managedFields could not be parsed; err says why.
	own *inventory.Ownership
	err error
}

// resourceVersion is the resourceVersion the pass read, the precondition of its first
// write.
func (pi passInventory) resourceVersion() string {
	if pi.inv == nil {
		return ""
	}
	return pi.inv.ResourceVersion
}

// readInventory reads rel's ReleaseInventory from the cache and parses its managedFields.
// A failed read is returned (the queue retries); unparsable managedFields are the
// inventory's error, which the assessment reports.
func (h *HealthController) readInventory(ctx context.Context, rel *v1alpha1.Release) (passInventory, error) {
	inv := &v1alpha1.ReleaseInventory{}
	if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(rel), inv); err != nil {
		if apierrors.IsNotFound(err) {
			return passInventory{}, nil
		}
		return passInventory{}, fmt.Errorf("reading ReleaseInventory %s: %w", base.KeyOf(rel), err)
	}
	own, err := inventory.ReadOwnership(inv)
	if err != nil {
		return passInventory{inv: inv, err: fmt.Errorf("reading the ReleaseInventory's field owners: %w", err)}, nil
	}
	return passInventory{inv: inv, own: own}, nil
}

// getCluster reads the target Cluster of rel from the cache; a nil Cluster comes with
// the error that says why.
func (h *HealthController) getCluster(ctx context.Context, rel *v1alpha1.Release) (*v1alpha1.Cluster, error) {
	cluster := &v1alpha1.Cluster{}
	err := h.Reader.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}, cluster)
	if apierrors.IsNotFound(err) {
		h.Clusters.Forget(rel.Namespace, rel.Spec.ClusterRef.Name) // release a deleted Cluster's clients
		return nil, fmt.Errorf("%w: Cluster %s/%s not found", clustercache.ErrClusterNotConnected, rel.Namespace, rel.Spec.ClusterRef.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading Cluster %s/%s: %w", rel.Namespace, rel.Spec.ClusterRef.Name, err)
	}
	return cluster, nil
}

// shardOf returns the shard of rel's Cluster. A Cluster that is gone keeps the shard
// this replica last saw it in, so the replica that owned it reports it missing; one it
// never saw belongs to the default shard.
func (h *HealthController) shardOf(rel *v1alpha1.Release, cluster *v1alpha1.Cluster) string {
	key := rel.Namespace + "/" + rel.Spec.ClusterRef.Name
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.clusterOf[base.KeyOf(rel)]; old != key {
		if h.clusterOf == nil {
			h.clusterOf, h.clusterRefs = map[string]string{}, map[string]int{}
		}
		h.clusterOf[base.KeyOf(rel)] = key
		h.clusterRefs[key]++
		if old != "" {
			h.dropClusterRef(old)
		}
	}
	if cluster != nil {
		if h.lastShard == nil {
			h.lastShard = map[string]string{}
		}
		h.lastShard[key] = cluster.Spec.Shard
		return cluster.Spec.Shard
	}
	return h.lastShard[key]
}

// forgetCluster drops the Release key from the Releases of its Cluster, and the memory
// of that Cluster with its last Release. Only for a Release that is gone: one whose shard
// moved still names its Cluster, and a Cluster that is gone keeps its last shard.
func (h *HealthController) forgetCluster(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cl, ok := h.clusterOf[key]; ok {
		delete(h.clusterOf, key)
		h.dropClusterRef(cl)
	}
}

// dropClusterRef counts one Release less for the Cluster cl, under h.mu.
func (h *HealthController) dropClusterRef(cl string) {
	if h.clusterRefs[cl]--; h.clusterRefs[cl] > 0 {
		return
	}
	delete(h.clusterRefs, cl)
	delete(h.lastShard, cl)
	h.events.forgetCluster(cl)
}

// forget drops the in-memory state of key.
func (h *HealthController) forget(key string) {
	h.untrackTargets(key)
	h.forgetFair(key)
	h.events.forget(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.attempts, key)
	delete(h.wakePending, key)
	delete(h.owed, key)
	delete(h.written, key)
	delete(h.entriesWritten, key)
}
