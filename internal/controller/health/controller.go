package health

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
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
	// Writer applies the observer's fields with Server-Side Apply.
	Writer client.Client
	// Clusters hands out a reader per target Cluster.
	Clusters base.ClusterClients
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

	mu sync.Mutex
	// attempts holds, per Release key, the attempt count of each pending target
	// (in memory, lost at a restart: spec "Re-check backoff").
	attempts map[string]map[string]int
	// lastShard remembers the shard of each Cluster (namespace/name) seen by this
	// replica, for the shard gate of Releases whose Cluster was deleted.
	lastShard map[string]string
	// wakePending marks keys whose sync request failed, so the next pass sends it
	// again even though the edge that caused it has passed.
	wakePending map[string]bool
}

// NewHealthController returns a loop with the real clock and default settings.
func NewHealthController(reader client.Reader, writer client.Client, clusters base.ClusterClients, shards *base.ShardGate, waker Waker) *HealthController {
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
	}
}

// SetupWithManager registers the loop with mgr: a base.Controller with workers and the
// event handlers of CONTRACT §2 on the manager's cache. It returns the controller so
// callers (and tests) can reach its queue.
func (h *HealthController) SetupWithManager(ctx context.Context, mgr manager.Manager, workers int) (*base.Controller, error) {
	c := base.NewController("health", workers, h.syncHandler)
	src := &base.EventSource{Cache: mgr.GetCache(), Reader: mgr.GetCache(), Enqueue: c.Enqueue, Log: h.Log}
	synced, err := src.Register(ctx)
	if err != nil {
		return nil, err
	}
	c.HasSynced = synced
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}

// SyncHandler returns the pass, for a base.Controller.
func (h *HealthController) SyncHandler() base.SyncFunc { return h.syncHandler }

// syncHandler does one pass for the Release key namespace/name (spec/health-loop.txt,
// "One pass"). An error is transient (the queue retries the key): a failed write or a
// failed sync request. Everything the rules or the target say lands in the Release's
// condition and the inventory instead.
func (h *HealthController) syncHandler(ctx context.Context, key string) (base.Result, error) {
	log := h.Log.WithValues("release", key)
	ctx = logr.NewContext(ctx, log)
	namespace, name, ok := strings.Cut(key, "/")
	if !ok {
		return base.Result{}, base.Terminal(fmt.Errorf("malformed key %q", key))
	}

	// 1. The Release, from the cache.
	rel := &v1alpha1.Release{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rel); err != nil {
		if apierrors.IsNotFound(err) {
			h.forget(key)
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
	inv := h.readInventory(ctx, rel)

	// 3. Deletion: only hooks.
	if rel.DeletionTimestamp != nil {
		hooks, err := h.pollHooks(ctx, rel, inv, cluster, clusterErr)
		if err != nil {
			log.Error(err, "polling hooks")
		}
		if err := h.wake(ctx, rel, edges{hooksFinished: hooks.finished}); err != nil {
			return base.Result{}, err
		}
		return h.scheduleHealthRecheck(key, rel, hooks.pendingTargets()), nil
	}

	// 4. Hooks.
	hooks, err := h.pollHooks(ctx, rel, inv, cluster, clusterErr)
	if err != nil {
		log.Error(err, "polling hooks")
	}

	// 5. Health.
	var pending []string
	var e edges
	if rel.Spec.HealthAssessment == nil {
		if err := h.writeHealth(ctx, rel, notConfigured(rel)); err != nil {
			return base.Result{}, err
		}
	} else {
		a, err := h.assess(ctx, rel, inv, cluster, clusterErr)
		var werr *writeError
		if errors.As(err, &werr) {
			return base.Result{}, err // our own write failed: retry, the Release is not Unknown
		}
		if err != nil {
			log.Info("assessment failed", "reason", err.Error())
			assessmentFailures.WithLabelValues(rel.Namespace, rel.Name).Inc()
			if werr := h.writeHealth(ctx, rel, assessFailed(rel, err)); werr != nil {
				return base.Result{}, werr
			}
			pending = append(pending, targetAssessment)
		} else {
			hs := a.healthStatus(rel)
			if err := h.writeHealth(ctx, rel, hs); err != nil {
				return base.Result{}, err
			}
			pending = append(pending, a.pendingTargets(hs)...)
			e = edges{waveCompleted: a.waveCompleted, renderAdvanced: a.renderAdvanced}
		}
	}
	e.hooksFinished = hooks.finished
	pending = append(pending, hooks.pendingTargets()...)

	// 6. Wake the controller.
	if err := h.wake(ctx, rel, e); err != nil {
		return base.Result{}, err
	}

	// 7. Next pass.
	return h.scheduleHealthRecheck(key, rel, pending), nil
}

// passInventory is rel's ReleaseInventory as one pass sees it: read once from the cache,
// with its field owners parsed once.
type passInventory struct {
	// inv is nil when there is no inventory (err is nil then) or it could not be read.
	inv *v1alpha1.ReleaseInventory
	own *inventory.Ownership
	err error
}

// readInventory reads rel's ReleaseInventory from the cache and parses its managedFields.
func (h *HealthController) readInventory(ctx context.Context, rel *v1alpha1.Release) passInventory {
	inv := &v1alpha1.ReleaseInventory{}
	if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(rel), inv); err != nil {
		if apierrors.IsNotFound(err) {
			return passInventory{}
		}
		return passInventory{err: fmt.Errorf("reading ReleaseInventory: %w", err)}
	}
	own, err := inventory.ReadOwnership(inv)
	if err != nil {
		return passInventory{err: fmt.Errorf("reading the ReleaseInventory's field owners: %w", err)}
	}
	return passInventory{inv: inv, own: own}
}

// getCluster reads the target Cluster of rel from the cache; a nil Cluster comes with
// the error that says why.
func (h *HealthController) getCluster(ctx context.Context, rel *v1alpha1.Release) (*v1alpha1.Cluster, error) {
	cluster := &v1alpha1.Cluster{}
	err := h.Reader.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}, cluster)
	if apierrors.IsNotFound(err) {
		h.Clusters.Forget(rel.Namespace, rel.Spec.ClusterRef.Name) // release a deleted Cluster's clients
		return nil, fmt.Errorf("%w: Cluster %s/%s not found", base.ErrClusterNotConnected, rel.Namespace, rel.Spec.ClusterRef.Name)
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
	if cluster != nil {
		if h.lastShard == nil {
			h.lastShard = map[string]string{}
		}
		h.lastShard[key] = cluster.Spec.Shard
		return cluster.Spec.Shard
	}
	return h.lastShard[key]
}

// forget drops the in-memory state of key.
func (h *HealthController) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.attempts, key)
	delete(h.wakePending, key)
}
