package healthloop

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// getCluster reads the target Cluster of rel from the cache; a nil Cluster comes with
// the error that says why; missing is true when the Cluster is gone (NotFound).
func (h *HealthController) getCluster(ctx context.Context, rel *v1alpha1.Release) (_ *v1alpha1.Cluster, missing bool, _ error) {
	cluster := &v1alpha1.Cluster{}
	err := h.Reader.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}, cluster)
	if apierrors.IsNotFound(err) {
		return nil, true, fmt.Errorf("%w: Cluster %s/%s not found", clustercache.ErrClusterNotConnected, rel.Namespace, rel.Spec.ClusterRef.Name)
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading Cluster %s/%s: %w", rel.Namespace, rel.Spec.ClusterRef.Name, err)
	}
	return cluster, false, nil
}

// clusterMemory is what the loop keeps of one Cluster (namespace/name) while a Release
// of this replica names it, under h.mu (docs/design.md, "In-memory state"): lost at a
// restart, like the re-check backoff (a restart may repeat one Cluster Event).
type clusterMemory struct {
	// shard is the Cluster's spec.shard when a pass last read it, for the shard gate of
	// its Releases once it is deleted.
	shard string
	// releases counts the Releases that name the Cluster; the memory goes with the last.
	releases int
	// down: its ClusterUnreachable Event was recorded, and no ClusterReachable since.
	down bool
	// events is the token bucket of its Releases' Events about it (events.go).
	events flowcontrol.RateLimiter
}

// shardOf returns the shard of rel's Cluster. A Cluster that is gone keeps the shard
// this replica last saw it in, so the replica that owned it reports it missing; one it
// never saw belongs to the default shard.
func (h *HealthController) shardOf(rel *v1alpha1.Release, cluster *v1alpha1.Cluster) string {
	key := toolscache.ObjectName{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}.String()
	unused := ""
	defer func() { h.forgetUnusedCluster(unused) }()
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.clusterOf[keyOf(rel)]; old != key {
		if h.clusterOf == nil {
			h.clusterOf, h.clusters = map[string]string{}, map[string]*clusterMemory{}
		}
		h.clusterOf[keyOf(rel)] = key
		if h.clusters[key] == nil {
			h.clusters[key] = &clusterMemory{}
		}
		h.clusters[key].releases++
		if old != "" && h.dropClusterRef(old) {
			unused = old
		}
	}
	m := h.clusters[key]
	if cluster != nil {
		m.shard = cluster.Spec.Shard
	}
	return m.shard
}

// forgetCluster drops the Release key from the Releases of its Cluster, and the memory
// of that Cluster with its last Release. Only for a Release that is gone: one whose shard
// moved still names its Cluster, and a Cluster that is gone keeps its last shard.
func (h *HealthController) forgetCluster(key string) {
	unused := ""
	h.mu.Lock()
	if cl, ok := h.clusterOf[key]; ok {
		delete(h.clusterOf, key)
		if h.dropClusterRef(cl) {
			unused = cl
		}
	}
	h.mu.Unlock()
	h.forgetUnusedCluster(unused)
}

// dropClusterRef counts one Release less for the Cluster cl, under h.mu; true when it
// was the last one (its memory is gone then).
func (h *HealthController) dropClusterRef(cl string) (last bool) {
	m := h.clusters[cl]
	if m == nil {
		return false
	}
	if m.releases--; m.releases > 0 {
		return false
	}
	delete(h.clusters, cl)
	return true
}

// clusterEvents returns the token bucket of the Release Events about the Cluster cl. A
// Cluster that no Release of this replica names (a pass that ends after its Release was
// deleted) gets a bucket of its own that is not kept.
func (h *HealthController) clusterEvents(cl string) flowcontrol.RateLimiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.clusters[cl]
	if m == nil {
		return flowcontrol.NewTokenBucketRateLimiter(clusterEventQPS, clusterEventBurst)
	}
	if m.events == nil {
		m.events = flowcontrol.NewTokenBucketRateLimiter(clusterEventQPS, clusterEventBurst)
	}
	return m.events
}

// markClusterDown records whether the Cluster cl is down; true when that changed (an
// edge). A Cluster that no Release of this replica names is no edge.
func (h *HealthController) markClusterDown(cl string, down bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.clusters[cl]
	if m == nil || m.down == down {
		return false
	}
	m.down = down
	return true
}

// forgetUnusedCluster lets the cluster cache forget the Cluster cl (namespace/name; ""
// for none) that no Release of this replica names any more: its clients, informers and
// metric series go with its last Release, so a Cluster deleted after its Releases (no
// pass sees it missing) leaves nothing behind. A Release that names it again rebuilds
// its clients. Not under h.mu: the cache takes its own lock.
func (h *HealthController) forgetUnusedCluster(cl string) {
	if cl == "" {
		return
	}
	ns, name, _ := strings.Cut(cl, "/")
	h.Clusters.Forget(ns, name)
}
