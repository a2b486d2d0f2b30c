package healthloop

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/controller/base"
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

// shardOf returns the shard of rel's Cluster. A Cluster that is gone keeps the shard
// this replica last saw it in, so the replica that owned it reports it missing; one it
// never saw belongs to the default shard.
func (h *HealthController) shardOf(rel *v1alpha1.Release, cluster *v1alpha1.Cluster) string {
	key := toolscache.ObjectName{Namespace: rel.Namespace, Name: rel.Spec.ClusterRef.Name}.String()
	unused := ""
	defer func() { h.forgetUnusedCluster(unused) }()
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.clusterOf[base.KeyOf(rel)]; old != key {
		if h.clusterOf == nil {
			h.clusterOf, h.clusterRefs = map[string]string{}, map[string]int{}
		}
		h.clusterOf[base.KeyOf(rel)] = key
		h.clusterRefs[key]++
		if old != "" && h.dropClusterRef(old) {
			unused = old
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
// was the last one.
func (h *HealthController) dropClusterRef(cl string) (last bool) {
	if h.clusterRefs[cl]--; h.clusterRefs[cl] > 0 {
		return false
	}
	delete(h.clusterRefs, cl)
	delete(h.lastShard, cl)
	h.events.forgetCluster(cl)
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
