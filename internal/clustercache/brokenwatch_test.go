package clustercache

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// breakable is a transport in front of the API server that can break the cluster the
// way a dead API server behind a load balancer looks: every open watch is cut, and
// every new request gets a connection reset (client-go answers a watch request that
// was reset with an empty watch and no error) or a 503.
type breakable struct {
	mode    atomic.Value // "": working, "reset", "503"
	mu      sync.Mutex
	watches []io.Closer
}

func (b *breakable) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	b.mode.Store("")
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			switch b.mode.Load() {
			case "reset":
				return nil, fmt.Errorf("read tcp: %w", syscall.ECONNRESET)
			case "503":
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Request: r,
					Header: http.Header{"Content-Type": []string{"application/json"}},
					Body:   io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`))}, nil
			}
			resp, err := rt.RoundTrip(r)
			if err == nil && r.URL.Query().Get("watch") == "true" {
				b.mu.Lock()
				if b.mode.Load() != "" {
					_ = resp.Body.Close() // broken while the watch was being answered
				} else {
					b.watches = append(b.watches, resp.Body)
				}
				b.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg
}

// set breaks the cluster (mode "reset" or "503") or repairs it (""); breaking cuts
// every open watch, and a watch whose answer comes after it.
func (b *breakable) set(mode string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mode.Store(mode)
	if mode == "" {
		return
	}
	for _, w := range b.watches {
		_ = w.Close()
	}
	b.watches = nil
}

// TestBrokenWatchIsNotTrusted: once a target's watches break — the connections are
// reset, or the server answers 503 — the cache may be stale, so a read must not answer
// from it: it asks the server and reports the failure (and the new value once the
// cluster is back), however the broken watch ended. Found by the fault suite
// (test/faults, fault "target"): a target that reset every connection kept its
// Releases Healthy from the stale cache.
func TestBrokenWatchIsNotTrusted(t *testing.T) {
	for _, mode := range []string{"reset", "503"} {
		t.Run(mode, func(t *testing.T) {
			ns := namespace(t)
			configMap(t, ns, "a", "1")
			b := &breakable{}
			cache := New(Options{Local: b.wrap(env.Config), Watch: true,
				Timeout: time.Second, HoldDown: 100 * time.Millisecond}) // client-go retries a reset GET for up to Timeout
			cluster := localCluster("broken-" + mode)
			reader, err := cache.GetReader(context.Background(), cluster)
			if err != nil {
				t.Fatal(err)
			}
			cache.Track("ns/r", cluster, []TargetRef{cmRef(ns, "a")})
			if obj, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a"); err != nil || obj.Object["data"].(map[string]any)["v"] != "1" {
				t.Fatalf("read of a working cluster: %v, %v", obj, err)
			}
			b.set(mode)
			configMap(t, ns, "a", "2") // the cache cannot see it: it is stale from now on
			eventually(t, "a read to fail instead of answering from the broken watch's cache", func() bool {
				_, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a")
				return err != nil
			})
			if obj, ok := reader.(CachedReader).GetCached(gvrConfigMaps, ns, "a"); ok {
				t.Fatalf("GetCached answered %v from a broken watch's cache; want false", obj)
			}
			// However it fails (not connected, the server's 503, client-go giving up its
			// retries), a broken cluster never looks like a missing object.
			if _, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a"); err == nil || apierrors.IsNotFound(err) {
				t.Fatalf("read of a broken cluster: %v; want an error other than NotFound", err)
			}
			b.set("")
			eventually(t, "the new value once the cluster is back", func() bool {
				obj, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a")
				return err == nil && obj.Object["data"].(map[string]any)["v"] == "2"
			})
		})
	}
}
