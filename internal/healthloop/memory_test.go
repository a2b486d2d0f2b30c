package healthloop

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// TestMemoryGoesWithTheRelease: what the loop remembers of a Release (its attempt
// counts, owed-sync state, last writes, Event kind, targets, budget cut) and of its
// Cluster (the shard it was last seen in, its Event budget and outage) is dropped when
// the Release is deleted, the Cluster's with its last Release: a churn of Releases and
// Clusters does not grow the process. A Release whose shard moved away keeps its
// Cluster's memory.
func TestMemoryGoesWithTheRelease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEvents()
	down := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: f.ns},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "gone-kubeconfig"}}}
	must(t, env.Client.Create(f.ctx, down))
	f.configMapRules("rules", readyRule)
	f.configMap("a", "true")
	var rels []*v1alpha1.Release
	for i := range 2 {
		f.rel, f.key = fmt.Sprintf("app-%d", i), fmt.Sprintf("%s/app-%d", f.ns, i)
		rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: f.rel, Namespace: f.ns},
			Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "gone"}, HealthAssessment: localRules(0)}}
		must(t, env.Client.Create(f.ctx, rel))
		rels = append(rels, rel)
		f.inventory(cm("a", 0, "r1"))
		f.lastAttempted("r1")
		f.pass()
		f.pass()
	}
	remembered := func() (clusters, shards, eventReleases, eventClusters int) {
		f.h.mu.Lock()
		defer f.h.mu.Unlock()
		clusters, shards = len(f.h.clusterOf), len(f.h.clusters)
		for _, m := range f.h.clusters {
			if m.events != nil || m.down {
				eventClusters++
			}
		}
		return
	}
	if r, c := f.h.remembered(); r != 2 || c != 1 {
		t.Fatalf("after the passes: %d Releases and %d Clusters remembered, want 2 and 1", r, c)
	}
	// What the Releases read is the cluster cache's index.
	cache := f.h.Clusters.(*clustercache.Cache)
	objA := clustercache.ObjectKey{Cluster: f.ns + "/gone", Kind: "ConfigMap", Namespace: f.ns, Name: "a"}
	if got := cache.Readers(objA); len(got) != 2 {
		t.Fatalf("after the passes: readers of ConfigMap a = %v, want both Releases", got)
	}
	if c, _, _, ec := remembered(); c != 2 || ec != 1 {
		t.Fatalf("after the passes: %d Releases' Clusters and %d Clusters' Events remembered, want 2 and 1", c, ec)
	}
	must(t, env.Client.Delete(f.ctx, down)) // its Releases keep the shard they last saw
	must(t, env.Client.Delete(f.ctx, rels[0]))
	f.rel, f.key = rels[0].Name, f.ns+"/"+rels[0].Name
	f.pass()
	if c, _, _, ec := remembered(); c != 1 || ec != 1 {
		t.Fatalf("with one Release of the Cluster left: %d and %d remembered, want 1 and 1", c, ec)
	}
	must(t, env.Client.Delete(f.ctx, rels[1]))
	f.rel, f.key = rels[1].Name, f.ns+"/"+rels[1].Name
	f.pass()
	if c, s, er, ec := remembered(); c != 0 || s != 0 || er != 0 || ec != 0 {
		t.Fatalf("after the last Release: %d Releases' Clusters, %d shards, %d Releases' and %d Clusters' Events remembered, want none", c, s, er, ec)
	}
	if r, c := f.h.remembered(); r != 0 || c != 0 {
		t.Fatalf("after the last Release: %d Releases and %d Clusters remembered, want none", r, c)
	}
	if got := cache.Readers(objA); len(got) != 0 {
		t.Fatalf("after the last Release: readers of ConfigMap a = %v, want none", got)
	}
}
