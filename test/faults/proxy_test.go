package faults

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy fault modes: what a faulty request gets.
const (
	modeNone     = ""
	mode429      = "429"     // 429 Too Many Requests, Retry-After: 1
	mode500      = "500"     // 500 Internal Server Error (a metav1.Status)
	mode503      = "503"     // 503 Service Unavailable
	modeReset    = "reset"   // the connection is reset (RST) without an answer
	modeLatency  = "latency" // the answer comes 0.5–1.5 s late
	modeHang     = "hang"    // no answer until the fault ends, then a reset
	proxyModeAll = "429,500,503,reset,latency,hang"
)

// faultProxy is a TLS reverse proxy in front of the API server that injects a fault
// into a share of the requests. It authenticates upstream as the test's administrator,
// so the observer's kubeconfig only needs its address.
type faultProxy struct {
	srv      *httptest.Server
	mu       sync.Mutex
	mode     string
	share    float64
	release  chan struct{} // closed when the current fault ends: hung requests return
	injected atomic.Int64
	total    atomic.Int64
	// gone counts the watches that ended with 410 Gone (a resourceVersion compacted
	// away): an HTTP 410, or an ERROR event of code 410 in the stream.
	gone     atomic.Int64
	upstream atomic.Pointer[http.RoundTripper]
	// writes are the arrival times and lines ("PATCH /apis/…") of the writes of the
	// observer's own objects (group convoy.kumodo.io) that came through.
	writesMu sync.Mutex
	writes   []write
}

// write is one write request that came through the proxy.
type write struct {
	at   time.Time
	what string
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// setUpstream authenticates upstream with cfg (after a restart of kube-apiserver, which
// comes back with new certificates).
func (p *faultProxy) setUpstream(cfg *rest.Config) error {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	p.upstream.Store(&rt)
	return nil
}

func newFaultProxy(t *testing.T, upstream *rest.Config) *faultProxy {
	t.Helper()
	target, err := url.Parse(upstream.Host)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1                    // watches stream
	rp.ErrorLog = log.New(io.Discard, "", 0) // refused dials while kube-apiserver restarts
	p := &faultProxy{release: make(chan struct{})}
	if err := p.setUpstream(upstream); err != nil {
		t.Fatal(err)
	}
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode == http.StatusGone {
			p.gone.Add(1)
		} else if resp.Request.URL.Query().Get("watch") == "true" {
			resp.Body = &goneScanner{ReadCloser: resp.Body, gone: &p.gone}
		}
		return nil
	}
	rp.Transport = roundTripperFunc(func(r *http.Request) (*http.Response, error) { return (*p.upstream.Load()).RoundTrip(r) })
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.total.Add(1)
		if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/apis/convoy.kumodo.io/") {
			p.writesMu.Lock()
			p.writes = append(p.writes, write{at: time.Now(), what: r.Method + " " + r.URL.Path})
			p.writesMu.Unlock()
		}
		mode, release := p.pick()
		if mode != modeNone {
			p.injected.Add(1)
		}
		switch mode {
		case mode429:
			w.Header().Set("Retry-After", "1")
			writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "injected: too many requests")
			return
		case mode500:
			writeStatus(w, http.StatusInternalServerError, "InternalError", "injected: etcdserver: request timed out")
			return
		case mode503:
			writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "injected: service unavailable")
			return
		case modeReset:
			reset(w)
			return
		case modeLatency:
			time.Sleep(500*time.Millisecond + time.Duration(rand.Int64N(int64(time.Second))))
		case modeHang:
			select {
			case <-release:
			case <-r.Context().Done():
			}
			reset(w)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	p.srv.EnableHTTP2 = false // one request per connection stream: resets hit one request
	p.srv.StartTLS()
	t.Cleanup(func() { p.set(modeNone, 0); p.srv.CloseClientConnections(); p.srv.Close() })
	return p
}

// goneScanner counts the ERROR events of code 410 in a watch stream.
type goneScanner struct {
	io.ReadCloser
	gone *atomic.Int64
	tail []byte // the end of the previous read: a match may span two reads
}

var gone410 = []byte(`"code":410`)

func (g *goneScanner) Read(b []byte) (int, error) {
	n, err := g.ReadCloser.Read(b)
	if n > 0 {
		buf := append(g.tail, b[:n]...)
		if bytes.Contains(buf, gone410) {
			g.gone.Add(1)
			buf = nil
		}
		g.tail = append([]byte(nil), buf[max(0, len(buf)-len(gone410)):]...)
	}
	return n, err
}

// dropConnections closes every client connection: the observer's watches end and
// resume from their last resourceVersion.
func (p *faultProxy) dropConnections() { p.srv.CloseClientConnections() }

func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":%q,"code":%d}`, message, reason, code)
}

// reset closes the client's connection with a TCP RST instead of an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*tls.Conn); ok {
		if tcp, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
	}
	_ = conn.Close()
}

// pick decides the fault of one request.
func (p *faultProxy) pick() (string, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == modeNone || rand.Float64() >= p.share {
		return modeNone, nil
	}
	return p.mode, p.release
}

// set starts injecting mode into share of the requests (modeNone: none); the
// requests hung by the previous mode return.
func (p *faultProxy) set(mode string, share float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.release)
	p.release = make(chan struct{})
	p.mode, p.share = mode, share
}

// kubeconfig writes a kubeconfig that reaches the API server through the proxy.
func (p *faultProxy) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: observer
  user: {token: unused}
contexts:
- name: proxy
  context: {cluster: proxy, user: observer}
current-context: proxy
`, p.srv.URL)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writesLog returns the writes of the observer's own objects that came through.
func (p *faultProxy) writesLog() []write {
	p.writesMu.Lock()
	defer p.writesMu.Unlock()
	return append([]write(nil), p.writes...)
}
