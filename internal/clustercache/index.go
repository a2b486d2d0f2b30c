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

// tracked is what one Release reads: each object's key (its bytes shared with the key
// of objects while this Release is the object's last to track it), and how many of them
// each resource and namespace has (its part of scopes): about 20 bytes an object, where
// its TargetRef is 96.
type tracked struct {
	cluster string
	keys    []string
	scopes  []scopeRefs
}

// scopeRefs counts the objects a Release reads of one resource in one namespace.
type scopeRefs struct {
	gvr       schema.GroupVersionResource
	namespace string
	refs      int
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

// trackedOf returns what refs on cluster are, as the index keeps them, in time linear in
// len(refs) (a Release may record thousands of objects in as many namespaces).
func trackedOf(cluster string, refs []TargetRef) tracked {
	t := tracked{cluster: cluster, keys: make([]string, len(refs))}
	type scope struct {
		gvr       schema.GroupVersionResource
		namespace string
	}
	var at map[scope]int // the scopes' positions, once there are more than a few
	for i, r := range refs {
		t.keys[i] = r.key(cluster)
		j := -1
		if at != nil {
			if p, ok := at[scope{r.GVR, r.Namespace}]; ok {
				j = p
			}
		} else {
			j = slices.IndexFunc(t.scopes, func(s scopeRefs) bool { return s.gvr == r.GVR && s.namespace == r.Namespace })
		}
		if j >= 0 {
			t.scopes[j].refs++
			continue
		}
		t.scopes = append(t.scopes, scopeRefs{gvr: r.GVR, namespace: r.Namespace, refs: 1})
		if at != nil {
			at[scope{r.GVR, r.Namespace}] = len(t.scopes) - 1
		} else if len(t.scopes) > 8 {
			at = make(map[scope]int, len(refs))
			for p, s := range t.scopes {
				at[scope{s.gvr, s.namespace}] = p
			}
		}
	}
	t.scopes = slices.Clip(t.scopes)
	return t
}

func (t tracked) equal(o tracked) bool {
	return t.cluster == o.cluster && slices.Equal(t.keys, o.keys) && slices.Equal(t.scopes, o.scopes)
}

// set replaces what release reads with refs on cluster (no refs: nothing) and returns
// the clusters whose scopes changed: none when the Release reads what it read (a
// steady pass changes nothing here).
func (x *index) set(release, cluster string, refs []TargetRef) []string {
	return x.setTracked(release, trackedOf(cluster, refs))
}

// setTracked is set with what the Release reads already made (trackedOf).
func (x *index) setTracked(release string, t tracked) []string {
	var changed []string
	cluster := t.cluster
	old, had := x.releases[release]
	if len(t.keys) == 0 {
		if had {
			x.remove(release, old)
			delete(x.releases, release)
			changed = append(changed, old.cluster)
		}
		return changed
	}
	if had && t.equal(old) {
		return nil
	}
	if had {
		x.remove(release, old)
		changed = append(changed, old.cluster)
	}
	x.releases[release] = t
	counts := x.scopes[cluster]
	if counts == nil {
		counts = map[schema.GroupVersionResource]map[string]int{}
		x.scopes[cluster] = counts
	}
	for _, k := range t.keys {
		if m := x.objects[k]; !slices.Contains(m, release) {
			x.objects[k] = append(m, release)
		}
	}
	for _, sc := range t.scopes {
		nss := counts[sc.gvr]
		if nss == nil {
			nss = map[string]int{}
			counts[sc.gvr] = nss
		}
		nss[sc.namespace] += sc.refs
	}
	if len(changed) == 0 || changed[0] != cluster {
		changed = append(changed, cluster)
	}
	return changed
}

func (x *index) remove(release string, t tracked) {
	for _, k := range t.keys {
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
	}
	counts := x.scopes[t.cluster]
	for _, sc := range t.scopes {
		if nss := counts[sc.gvr]; nss != nil {
			if nss[sc.namespace] -= sc.refs; nss[sc.namespace] <= 0 {
				delete(nss, sc.namespace)
			}
			if len(nss) == 0 {
				delete(counts, sc.gvr)
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
	t := trackedOf(key, refs) // outside the lock: every pass makes one
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := c.index.setTracked(release, t)
	if len(changed) == 0 && key != "" {
		// What the Release reads did not change; a type read with GETs since its watch
		// was refused is watched again at the first Track after FallbackRetry.
		if cc := c.clients[key]; cc != nil && cc.watches != nil && cc.watches.retryDue() {
			changed = []string{key}
		}
	}
	for _, changed := range changed {
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
