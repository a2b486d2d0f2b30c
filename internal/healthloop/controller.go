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
	"github.com/kumodo/convoy-observer/internal/controllerkit"
	"github.com/kumodo/convoy-observer/internal/fairshare"
	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// Waker wakes the controller-manager for one Release: POST …/releases/<name>/sync. Its
// answer's SyncRequestedAt is the sync annotation the request set (empty when the server
// does not say); a failed request is an error (a missing Release a NotFound
// apierrors.APIStatus naming it).
type Waker interface {
	Sync(ctx context.Context, namespace, name string) (*syncapi.SyncResponse, error)
}

// DefaultReadConcurrency bounds the concurrent reads of target objects in one pass.
const DefaultReadConcurrency = 16

// DefaultPassTimeout bounds the reads of one pass (--pass-timeout): 5 minutes, about 30
// times what a pass over 10,000 entries of a healthy cluster reads for.
const DefaultPassTimeout = 5 * time.Minute

// errPassTimeout is the cause of a pass's context when PassTimeout passed.
var errPassTimeout = errors.New("pass timeout")

// writeTimeout bounds the writes of a pass whose reads ran out of PassTimeout.
const writeTimeout = 30 * time.Second

// HealthController is the health loop. Its fields are its seams: tests set Clock, Rand
// and Waker, and drive syncHandler directly.
type HealthController struct {
	// Reader reads Releases, ReleaseInventories, Clusters and rule sets; the manager's
	// cache in production.
	Reader client.Reader
	// LiveReader reads from the API server (a client without a cache): the Release's
	// sync annotation to confirm a new owed sync record when the pass wrote no
	// condition, or to tell whether another process's record was paid. nil uses Reader.
	LiveReader client.Reader
	// Writer applies the observer's fields with Server-Side Apply.
	Writer client.Client
	// Clusters hands out a reader per target Cluster.
	Clusters clustercache.ClusterCache
	// Shards is the shard gate of this replica.
	Shards *ShardGate
	// Waker sends the sync request; nil disables wake-ups (logged once per edge).
	Waker Waker
	// Clock is the time source of anchors, deadlines and hook timeouts.
	Clock clock.PassiveClock
	// Rand returns a number in [0, 1) for the re-check jitter.
	Rand func() float64
	// ReadConcurrency bounds concurrent target reads per pass.
	ReadConcurrency int
	// PassTimeout bounds the reads of one pass (0: no bound): a pass whose target
	// answers too slowly for its inventory stops reading at PassTimeout, says so in the
	// Healthy condition (Unknown) and frees its worker for other Releases, instead of
	// holding it for as long as the reads take. NewHealthController sets
	// DefaultPassTimeout.
	PassTimeout time.Duration
	// NamespaceWorkers bounds the passes of one namespace in flight at once (0: no
	// bound; SetupWithManager makes it half the workers when it is 0): the Releases of a
	// tenant whose cluster answers slowly cannot hold every worker, and a pass over the
	// bound ends at once and comes back a quarter of a second later (namespaceRetry).
	NamespaceWorkers int
	nsPasses         namespacePasses
	// Log is the loop's logger.
	Log logr.Logger
	// Evaluators caches the compiled rules of each selection of rule sets across
	// passes and Releases; nil gets one on first use.
	Evaluators *health.EvaluatorCache
	evalOnce   sync.Once
	// fields serializes the computations of what the rules read (keepFields).
	fields ruleFields
	// Enqueue adds a Release key to the loop's queue; SetupWithManager sets it. Changes
	// of target objects wake the Releases that read them through it (nil: no wake-ups).
	Enqueue func(key string)
	// Events records the loop's Kubernetes Events (events.k8s.io/v1) on Releases and
	// Clusters, on edges only (events.go); nil records none.
	Events EventRecorder

	// Fair configures the budget of a pass and the fair evaluation across namespaces
	// (fair.go); NewHealthController sets DefaultPassBudget.
	Fair FairOptions
	fair fairState

	// mu guards the memory below (docs/design.md, "In-memory state").
	mu sync.Mutex
	// memory holds what the loop keeps of each Release key between passes (memory.go).
	memory map[string]*releaseMemory
	// clusterOf holds the Cluster (namespace/name) of each Release key this replica
	// passed; clusters what is remembered of each Cluster that one of them names
	// (clusters.go). A Release's Cluster outlives its releaseMemory: a Release whose shard
	// moved still names its Cluster, and a Cluster that is gone keeps its last shard.
	clusterOf map[string]string
	clusters  map[string]*clusterMemory
}

// NewHealthController returns a loop with the real clock and default settings.
func NewHealthController(reader client.Reader, writer client.Client, clusters clustercache.ClusterCache, shards *ShardGate, waker Waker) *HealthController {
	return &HealthController{
		Reader:          reader,
		Writer:          writer,
		Clusters:        clusters,
		Shards:          shards,
		Waker:           waker,
		Clock:           clock.RealClock{},
		Rand:            rand.Float64,
		ReadConcurrency: DefaultReadConcurrency,
		PassTimeout:     DefaultPassTimeout,
		Log:             ctrl.Log.WithName("health"),
		Fair:            FairOptions{PassBudget: DefaultPassBudget},
	}
}

// SetupWithManager registers the loop with mgr as the controller-runtime controller
// "health" (controllerkit.ControllerOptions: workers concurrent passes, the loop's own rate
// limiter, panics recovered, leader election). Its watches add the keys of docs/design.md,
// "Events that add a key": Releases and ReleaseInventories (filtered by
// ReleasePredicate and InventoryPredicate), rule sets and Clusters (fanned out
// to their Releases, Clusters through the Release-by-Cluster field index); changes of
// target objects and rebuilt clusters (a rotated kubeconfig Secret) come through
// Enqueue. It also adds the leader's warm start of the target cache (warm.go). It
// returns the reconciler, whose Sync tests may wrap before mgr starts.
func (h *HealthController) SetupWithManager(ctx context.Context, mgr manager.Manager, workers int) (*controllerkit.Reconciler, error) {
	if err := IndexReleasesByCluster(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	fan := ReleaseFanOut{Reader: mgr.GetCache(), Log: h.Log}
	enq := &controllerkit.Enqueuer{}
	h.Enqueue = enq.Enqueue
	// A changed target object wakes the Releases that read it; a rotated kubeconfig
	// Secret wakes every Release of its Cluster.
	h.Clusters.Watch(h.targetChanged, func(namespace, name string) { enq.Add(fan.Releases(ctx, namespace, name)...) })
	if h.NamespaceWorkers == 0 {
		h.NamespaceWorkers = max(1, workers/2)
	}
	opts := controllerkit.ControllerOptions(workers)
	opts.RateLimiter = h.rateLimiter(opts.RateLimiter)
	opts.Logger = h.Log
	// Keys are served round-robin across namespaces (fair.go).
	opts.NewQueue = fairshare.NewQueue(fairshare.QueueOptions{Weight: h.Fair.Weight, Waited: observeQueueWait})
	r := &controllerkit.Reconciler{Sync: h.syncHandler}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("health").
		For(&v1alpha1.Release{}, builder.WithPredicates(ReleasePredicate())).
		Watches(&v1alpha1.ReleaseInventory{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(InventoryPredicate())).
		Watches(&extv1alpha1.GlobalHealthRuleSet{}, handler.EnqueueRequestsFromMapFunc(fan.All)).
		Watches(&extv1alpha1.HealthRuleSet{}, handler.EnqueueRequestsFromMapFunc(fan.InNamespace)).
		Watches(&v1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(fan.OfCluster), builder.WithPredicates(ClusterPredicate())).
		WatchesRawSource(enq.Source()).
		WithOptions(opts).
		Complete(r)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(&warmStart{h: h, cache: mgr.GetCache()}); err != nil {
		return nil, err
	}
	return r, nil
}

// rateLimiter caps the retry delays of rl at each Release's syncPolicy.interval when
// that is shorter than controllerkit.RetryMaxDelay (32s, the longest re-check delay): a failed
// write is never retried later than the next re-check would have come.
func (h *HealthController) rateLimiter(rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimiter[reconcile.Request] {
	return controllerkit.WithMaxDelay(rl, func(req reconcile.Request) time.Duration {
		rel := &v1alpha1.Release{}
		// From the cache (no request to the API server); a Release it does not hold keeps
		// controllerkit.RetryMaxDelay.
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
// "One pass"). It reads, decides, then acts: it reads the Release, its Cluster and
// inventory, polls the hooks and reads and evaluates the entries, all without writing;
// decide computes the pass's result from what it read; then the hooks, the entries and
// the Healthy condition are applied in that order, each write carrying the
// resourceVersion that the previous one produced, the sync request is sent, and only
// then does the pass record its memory, metrics and Events (recordPass), so a pass whose
// writes fail leaves nothing behind but the retry. Reads of target objects are judged
// (they land in the condition and the inventory); every failed write of the observer's
// own fields and a failed sync request are returned, so the queue retries the key with
// its rate limit. A write that lost a precondition race, and a pass cut off by shutdown,
// are controllerkit.Quiet: retried without an error-level line. A cancelled pass writes nothing.
func (h *HealthController) syncHandler(ctx context.Context, key string) (_ controllerkit.Result, err error) {
	log := h.Log.WithValues("release", key)
	ctx = logr.NewContext(ctx, log)
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = controllerkit.Quiet(fmt.Errorf("pass stopped: %w", err))
		}
	}()
	namespace, name, ok := strings.Cut(key, "/")
	if !ok {
		return controllerkit.Result{}, reconcile.TerminalError(fmt.Errorf("malformed key %q", key))
	}
	if h.NamespaceWorkers > 0 {
		if !h.nsPasses.acquire(namespace, h.NamespaceWorkers) {
			// The namespace holds its share of the workers: this pass comes back soon.
			log.V(1).Info("the namespace holds its share of the workers (NamespaceWorkers); the pass comes back", "namespaceWorkers", h.NamespaceWorkers)
			return controllerkit.Result{RequeueAfter: h.jitter(namespaceRetry)}, nil
		}
		defer h.nsPasses.release(namespace)
	}
	passesTotal.WithLabelValues(namespace).Inc()

	// 1. The Release, from the cache.
	rel := &v1alpha1.Release{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rel); err != nil {
		if apierrors.IsNotFound(err) {
			h.forget(key)
			h.forgetCluster(key)
			forgetMetrics(namespace, name)
			h.forgetNamespaceMetrics(ctx, namespace)
			return controllerkit.Result{}, nil // the controller-manager deletes the inventory
		}
		return controllerkit.Result{}, fmt.Errorf("reading Release %s: %w", key, err)
	}
	rel = rel.DeepCopy()
	h.forgetReplaced(key, rel.UID)
	defer h.stampMemory(key, rel.UID)

	// 2. Shard gate.
	cluster, missing, clusterErr := h.getCluster(ctx, rel)
	if missing {
		// The clients of a Cluster that is gone are released when the pass ends.
		defer h.Clusters.Forget(rel.Namespace, rel.Spec.ClusterRef.Name)
	}
	shard := h.shardOf(rel, cluster)
	if !h.Shards.Owns(shard) {
		log.V(1).Info("skipping: the Cluster's shard belongs to another replica", "cluster", rel.Spec.ClusterRef.Name, "shard", shard)
		h.forget(key)
		forgetMetrics(namespace, name) // the owner of the shard exports them now
		return controllerkit.Result{}, nil
	}

	// The inventory, read once for the hooks and the assessment of this pass; what the
	// pass reads from the target is tracked (watched) before it reads it.
	inv, err := h.readInventory(ctx, rel)
	if err != nil {
		return controllerkit.Result{}, err
	}
	h.trackTargets(key, rel, cluster, inv)

	// The API server refused this very inventory as too large: said once, not read again
	// (toolarge.go).
	if rel.DeletionTimestamp == nil && h.stillRefused(key, rel, inv) {
		log.V(1).Info("skipping: the API server refused this inventory as too large; assessed again when it changes")
		return h.scheduleHealthRecheck(key, rel, nil), nil
	}

	// 3. Hooks (a deletion pass does nothing else), 4. health: read and evaluated, within
	// PassTimeout.
	readCtx, cancelReads := ctx, context.CancelFunc(func() {})
	if h.PassTimeout > 0 {
		readCtx, cancelReads = context.WithTimeoutCause(ctx, h.PassTimeout, errPassTimeout)
	}
	defer cancelReads()
	in := passInput{rel: rel, hooks: h.observeHooks(readCtx, inv, cluster, clusterErr),
		budgetCutBefore: h.recall(key).budgetCut, budget: h.Fair.PassBudget, now: h.Clock.Now()}
	if rel.DeletionTimestamp == nil && rel.Spec.HealthAssessment != nil {
		in.observed, in.assessErr = h.observeEntries(readCtx, rel, inv, cluster, clusterErr)
	}
	writeCtx := ctx
	if ctx.Err() == nil && errors.Is(context.Cause(readCtx), errPassTimeout) {
		// The reads ran out of time, not the process: what was read is not the truth,
		// but the Release says why, and the worker goes to other Releases.
		log.Info("pass timed out; its target answers too slowly for its inventory", "passTimeout", h.PassTimeout.String())
		in.observed, in.assessErr = nil, fmt.Errorf("the pass did not finish its reads within --pass-timeout (%s): "+
			"the target cluster answers too slowly for this inventory", h.PassTimeout)
		in.hooks = nil // the hooks keep their state
		var cancelWrites context.CancelFunc
		writeCtx, cancelWrites = context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancelWrites()
	}

	// 5. Decide.
	res := decide(in)

	// 6. Write, then wake the controller; then record the pass.
	if err := h.commit(writeCtx, rel, inv, res); err != nil {
		return controllerkit.Result{}, err
	}
	h.recordPass(writeCtx, rel, res)
	pending := res.pending
	if rel.DeletionTimestamp == nil && h.recall(key).refused != nil {
		pending = nil // a refused write comes back on the interval, or when the inventory changes
	}

	// 7. Next pass.
	return h.scheduleHealthRecheck(key, rel, pending), nil
}

// recordPass records what a pass whose writes landed leaves besides its writes: the log
// of the hooks that finished, the memory of the budget cut, the metrics of the assessment (failures, unjudged entries,
// budget cuts), the EvaluationBudgetExceeded Event on the edge of a cut, and the log of
// the entries that are not healthy.
func (h *HealthController) recordPass(ctx context.Context, rel *v1alpha1.Release, res passResult) {
	log := h.logFrom(ctx)
	for _, hk := range res.hooks.terminal {
		log.Info("hook finished", "hook", hk.Name, "state", hk.State, "message", hk.Message, "rearmed", hk.rearmed)
	}
	switch {
	case rel.DeletionTimestamp != nil:
		return
	case rel.Spec.HealthAssessment == nil:
		forgetUnjudged(rel.Namespace, rel.Name)
		return
	case res.assessErr != nil:
		if ctx.Err() == nil {
			log.Info("assessment failed", "reason", res.assessErr.Error())
			assessmentFailures.WithLabelValues(rel.Namespace, rel.Name).Inc()
		}
		return
	}
	a := res.a
	recordUnjudged(rel.Namespace, rel.Name, a.unjudged)
	h.remember(keyOf(rel), func(m *releaseMemory) { m.budgetCut = a.budgetCut > 0 })
	if a.budgetCut > 0 {
		budgetCuts.WithLabelValues(rel.Namespace).Inc()
		budgetCutEntries.WithLabelValues(rel.Namespace).Add(float64(a.budgetCut))
	}
	h.recordBudgetEvent(rel, a)
	for i := range a.entries {
		r := &a.entries[i]
		if r.state != v1alpha1.StateHealthy && r.state != v1alpha1.StateUnknown {
			log.V(1).Info("object not healthy", "object", r.key.String(), "state", r.state, "message", r.message, "ruleSet", r.ruleSet, "rule", r.rule)
		}
	}
}
