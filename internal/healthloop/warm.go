package healthloop

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// warmStart is the leader's warm start (docs/design.md, "One pass"): once the
// Releases, ReleaseInventories, Clusters and GlobalHealthRuleSets are cached, it starts
// the target informers that the recorded inventories name, before the first pass. The
// target clusters' first lists then run while the controller waits for the rest of its
// caches (the HealthRuleSets, which every pass must see), instead of holding up the
// first passes after it.
type warmStart struct {
	h     *HealthController
	cache ctrlcache.Informers
}

// NeedLeaderElection: only the leader reads target clusters.
func (w *warmStart) NeedLeaderElection() bool { return true }

// Start waits for the caches warm reads and warms the target cache once; it returns
// when done, or at once when the context ends. It waits on the informers' sync
// (HasSyncedChecker), not by polling them: the target clusters' first lists start the
// moment the last of those caches is filled.
func (w *warmStart) Start(ctx context.Context) error {
	var synced []toolscache.DoneChecker
	for _, obj := range []client.Object{&v1alpha1.Release{}, &v1alpha1.ReleaseInventory{}, &v1alpha1.Cluster{}, &extv1alpha1.GlobalHealthRuleSet{}} {
		inf, err := w.cache.GetInformer(ctx, obj)
		if err != nil {
			w.h.Log.Info("no warm start of the target cache", "reason", err.Error())
			return nil
		}
		synced = append(synced, inf.HasSyncedChecker())
	}
	if !toolscache.WaitFor(ctx, "", synced...) {
		return nil
	}
	w.h.warm(ctx)
	return nil
}

// warm starts the target informers of every Release of this replica's shards (opts
// narrow the list, for tests) as its pass would (trackTargets, and the Cluster's reader,
// whose clients start them), without reading a target object or writing anything.
// Before, unless a pass was first, it sets the fields that the GlobalHealthRuleSets read
// (FieldKeeper): a pass whose HealthRuleSets read more adds them before it reads
// (keepFields). A Release it cannot place (no Cluster, no inventory, deleted, another
// shard's) is left to its pass.
func (h *HealthController) warm(ctx context.Context, opts ...client.ListOption) {
	if keeper, ok := h.Clusters.(FieldKeeper); ok {
		h.fields.mu.Lock()
		if _, set := keeper.RuleFields(); !set {
			var globals extv1alpha1.GlobalHealthRuleSetList
			if err := h.Reader.List(ctx, &globals, client.UnsafeDisableDeepCopy); err != nil {
				h.fields.mu.Unlock()
				h.Log.Info("no warm start of the target cache", "reason", err.Error())
				return
			}
			keeper.SetRuleFields(health.FieldsOf(globals.Items, nil))
		}
		h.fields.mu.Unlock()
	}
	var releases v1alpha1.ReleaseList
	if err := h.Reader.List(ctx, &releases, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		h.Log.Info("no warm start of the target cache", "reason", err.Error())
		return
	}
	warmed := 0
	for i := range releases.Items {
		rel := &releases.Items[i]
		if ctx.Err() != nil {
			return
		}
		if rel.DeletionTimestamp != nil || rel.Spec.HealthAssessment == nil {
			continue
		}
		cluster, _, err := h.getCluster(ctx, rel)
		if err != nil || !h.Shards.Owns(h.shardOf(rel, cluster)) {
			continue
		}
		inv, err := h.readInventory(ctx, rel)
		if err != nil || inv.inv == nil || inv.own == nil {
			continue
		}
		h.trackTargets(keyOf(rel), rel, cluster, inv)
		// The informers of a cluster start with its clients, at its first reader.
		if _, err := h.Clusters.GetReader(ctx, cluster); err == nil {
			warmed++
		}
	}
	h.Log.V(1).Info("warmed the target cache", "releases", warmed)
}
