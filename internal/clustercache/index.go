package clustercache

import (
	"encoding/binary"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// index is the one record of which Release reads which target object. Each Track
// replaces its Release's part (level-triggered: a Release reads what its last pass saw).
// From it come the Releases a changed object wakes (objects) and, per cluster, the
// types and namespaces its informers cover (scopes).
type index struct {
	releases map[string]tracked // release → what it reads
	// objects maps an object (objectKey) to the Releases that read it, unsorted and
	// without repeats: almost always one, so a slice (24 bytes) rather than a set (a map
	// costs ~200), under a key of one string (16 bytes and its bytes, where an ObjectKey
	// is five string headers: 80).
	objects map[string][]string
	scopes  map[string]map[schema.GroupVersionResource]map[string]int // cluster → gvr → namespace → refs
}

type tracked struct {
	cluster string
	refs    []TargetRef
}

func newIndex() index {
	return index{releases: map[string]tracked{}, objects: map[string][]string{},
		scopes: map[string]map[schema.GroupVersionResource]map[string]int{}}
}

func (r TargetRef) key(cluster string) string {
	return objectKey(ObjectKey{Cluster: cluster, Group: r.GVR.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
}

// objectKey is k as one string: each part with its length first, so no two keys meet.
func objectKey(k ObjectKey) string {
	b := make([]byte, 0, 5+len(k.Cluster)+len(k.Group)+len(k.Kind)+len(k.Namespace)+len(k.Name))
	for _, part := range []string{k.Cluster, k.Group, k.Kind, k.Namespace, k.Name} {
		b = binary.AppendUvarint(b, uint64(len(part)))
		b = append(b, part...)
	}
	return string(b)
}

// set replaces what release reads with refs on cluster (no refs: nothing) and returns
// the clusters whose scopes changed.
func (x *index) set(release, cluster string, refs []TargetRef) []string {
	var changed []string
	if old, ok := x.releases[release]; ok {
		x.remove(release, old)
		changed = append(changed, old.cluster)
	}
	if len(refs) == 0 {
		delete(x.releases, release)
		return changed
	}
	x.releases[release] = tracked{cluster: cluster, refs: refs}
	counts := x.scopes[cluster]
	if counts == nil {
		counts = map[schema.GroupVersionResource]map[string]int{}
		x.scopes[cluster] = counts
	}
	for _, r := range refs {
		k := r.key(cluster)
		if m := x.objects[k]; !slices.Contains(m, release) {
			x.objects[k] = append(m, release)
		}
		nss := counts[r.GVR]
		if nss == nil {
			nss = map[string]int{}
			counts[r.GVR] = nss
		}
		nss[r.Namespace]++
	}
	if len(changed) == 0 || changed[0] != cluster {
		changed = append(changed, cluster)
	}
	return changed
}

func (x *index) remove(release string, t tracked) {
	counts := x.scopes[t.cluster]
	for _, r := range t.refs {
		k := r.key(t.cluster)
		if m := x.objects[k]; m != nil {
			if i := slices.Index(m, release); i >= 0 {
				m = slices.Delete(m, i, i+1)
			}
			if len(m) == 0 {
				delete(x.objects, k)
			} else {
				x.objects[k] = m
			}
		}
		if nss := counts[r.GVR]; nss != nil {
			if nss[r.Namespace]--; nss[r.Namespace] <= 0 {
				delete(nss, r.Namespace)
			}
			if len(nss) == 0 {
				delete(counts, r.GVR)
			}
		}
	}
	if len(counts) == 0 {
		delete(x.scopes, t.cluster)
	}
}

// readers returns the sorted keys of the Releases that read the object key
// (objectKey).
func (x *index) readers(key string) []string {
	out := slices.Clone(x.objects[key])
	slices.Sort(out)
	return out
}

// Track implements ClusterCache.
func (c *Cache) Track(release string, cluster *v1alpha1.Cluster, refs []TargetRef) {
	key := ""
	if cluster != nil {
		key = toolscache.MetaObjectToName(cluster).String()
	} else {
		refs = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, changed := range c.index.set(release, key, refs) {
		if cc := c.clients[changed]; cc != nil && cc.watches != nil {
			cc.watches.sync(c.index.scopes[changed])
		}
	}
}

// Untrack implements ClusterCache.
func (c *Cache) Untrack(release string) { c.Track(release, nil, nil) }

// Watch implements ClusterCache.
func (c *Cache) Watch(release func(string), cluster func(namespace, name string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onRelease, c.onCluster = release, cluster
}

// Readers returns the sorted keys of the Releases that read k (Track).
func (c *Cache) Readers(k ObjectKey) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index.readers(objectKey(k))
}

// objectChanged calls the Watch callback with each Release that reads k.
func (c *Cache) objectChanged(k ObjectKey) {
	c.mu.Lock()
	fn := c.onRelease
	releases := c.index.readers(objectKey(k))
	c.mu.Unlock()
	if fn == nil {
		return
	}
	for _, r := range releases {
		fn(r)
	}
}
