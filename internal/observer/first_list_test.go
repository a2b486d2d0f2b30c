package observer_test

import (
	"context"
	"net/http"
	"path"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kumodo/convoy-observer/internal/observer"
)

// firstLists records, per resource, the management cache's plain lists and its watches
// that stream a first list (sendInitialEvents).
type firstLists struct {
	mu              sync.Mutex
	plain, streamed map[string]int
}

func (f *firstLists) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	f.plain, f.streamed = map[string]int{}, map[string]int{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			q, resource := r.URL.Query(), path.Base(r.URL.Path)
			f.mu.Lock()
			switch {
			case r.Method != http.MethodGet:
			case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
				f.streamed[resource]++
			case q.Get("watch") != "true" && q.Has("resourceVersion"):
				f.plain[resource]++ // an informer's list; a GET of one object has no resourceVersion
			}
			f.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestManagementCacheListsFirst: every informer of the observer's management cache
// (Releases, inventories, Clusters, both kinds of rule sets) starts with a plain list,
// as the target informers do, not with a watch that streams the first list: a stream
// of a type nobody writes ends only when the watch cache is as fresh as etcd, and no
// pass starts before it.
func TestManagementCacheListsFirst(t *testing.T) {
	ns := namespace(t)
	lists := &firstLists{}
	mgr, _ := startObserver(t, lists.wrap(env.Config), options(func(o *observer.Options) { o.Management.Namespaces = []string{ns} }))
	if !mgr.GetCache().WaitForCacheSync(context.Background()) {
		t.Fatal("the cache did not sync")
	}
	eventually(t, "the sources' informers", func() bool {
		lists.mu.Lock()
		defer lists.mu.Unlock()
		return len(lists.plain)+len(lists.streamed) >= 5
	})
	lists.mu.Lock()
	defer lists.mu.Unlock()
	for _, resource := range []string{"releases", "releaseinventories", "clusters", "globalhealthrulesets", "healthrulesets"} {
		if lists.plain[resource] != 1 || lists.streamed[resource] != 0 {
			t.Errorf("%s: %d plain lists and %d streamed first lists; want one plain list", resource, lists.plain[resource], lists.streamed[resource])
		}
	}
}
