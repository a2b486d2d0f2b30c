// Package fake is a clustercache.ClusterCache for tests of pure logic: it hands out one
// reader (or one error) for every Cluster, records what each Release tracks, and lets
// the test play the cache's callbacks (Changed, Rebuilt). Tests that read a real
// cluster use clustercache.New against the test API server instead.
package fake

import (
	"context"
	"slices"
	"sync"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// ClusterCache is the fake. Set Reader or Err before use; the zero value answers every
// GetReader with a nil reader and no error.
type ClusterCache struct {
	// Reader is what GetReader returns for every Cluster, unless Err is set.
	Reader clustercache.ObjectReader
	// Err, when set, is GetReader's error (wrap clustercache.ErrClusterNotConnected for
	// an unreachable cluster).
	Err error

	mu        sync.Mutex
	tracked   map[string][]clustercache.TargetRef
	forgotten []string
	onRelease func(string)
	onCluster func(namespace, name string)
}

var _ clustercache.ClusterCache = (*ClusterCache)(nil)

// New returns a fake that hands out reader.
func New(reader clustercache.ObjectReader) *ClusterCache { return &ClusterCache{Reader: reader} }

// GetReader implements clustercache.ClusterCache.
func (f *ClusterCache) GetReader(context.Context, *v1alpha1.Cluster) (clustercache.ObjectReader, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	return f.Reader, nil
}

// Track implements clustercache.ClusterCache.
func (f *ClusterCache) Track(release string, cluster *v1alpha1.Cluster, refs []clustercache.TargetRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tracked == nil {
		f.tracked = map[string][]clustercache.TargetRef{}
	}
	if cluster == nil || len(refs) == 0 {
		delete(f.tracked, release)
		return
	}
	f.tracked[release] = slices.Clone(refs)
}

// Untrack implements clustercache.ClusterCache.
func (f *ClusterCache) Untrack(release string) { f.Track(release, nil, nil) }

// Watch implements clustercache.ClusterCache.
func (f *ClusterCache) Watch(release func(string), cluster func(namespace, name string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onRelease, f.onCluster = release, cluster
}

// Forget implements clustercache.ClusterCache; Forgotten lists the calls.
func (f *ClusterCache) Forget(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, namespace+"/"+name)
}

// Tracked returns what release tracks now (nil: nothing).
func (f *ClusterCache) Tracked(release string) []clustercache.TargetRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tracked[release])
}

// Forgotten returns the namespace/name of each Cluster forgotten so far, in order.
func (f *ClusterCache) Forgotten() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.forgotten)
}

// Changed plays a change of an object that the Releases read: the Watch release
// callback is called with each of them, as the real cache does after a watch event.
func (f *ClusterCache) Changed(releases ...string) {
	f.mu.Lock()
	fn := f.onRelease
	f.mu.Unlock()
	if fn == nil {
		return
	}
	for _, r := range releases {
		fn(r)
	}
}

// Rebuilt plays a rotated kubeconfig Secret of the Cluster namespace/name.
func (f *ClusterCache) Rebuilt(namespace, name string) {
	f.mu.Lock()
	fn := f.onCluster
	f.mu.Unlock()
	if fn != nil {
		fn(namespace, name)
	}
}
