package faults

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/subresources"
)

// syncAPI is a stand-in for convoy-api's POST …/sync: it sets the sync annotation as
// convoy-api does and keeps its own log of the requests it served, which the invariants
// are checked against. It can be taken down (connection refused) and brought back on the
// same address.
type syncAPI struct {
	addr string
	mu   sync.Mutex
	log  map[string][]time.Time // Release key → times of the served requests
	srv  *http.Server
	down bool
}

func newSyncAPI(t *testing.T) *syncAPI {
	t.Helper()
	s := &syncAPI{log: map[string][]time.Time{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(func() { s.setDown(t, true) })
	return s
}

func (s *syncAPI) url() string { return "http://" + s.addr }

func (s *syncAPI) serve(ln net.Listener) {
	s.srv = &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
}

// setDown stops (true) or restarts (false) the endpoint.
func (s *syncAPI) setDown(t *testing.T, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down == down {
		return
	}
	s.down = down
	if down {
		_ = s.srv.Close()
		return
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger for a moment
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("sync endpoint back on %s: %v", s.addr, err)
		return
	}
	s.serve(ln)
}

func (s *syncAPI) handle(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, subresources.PathPrefix+"/namespaces/")
	seg := strings.Split(rest, "/")
	if !ok || r.Method != http.MethodPost || len(seg) != 4 || seg[1] != "releases" || seg[3] != subresources.SubresourceSync {
		writeStatus(w, http.StatusNotFound, "NotFound", "no such path")
		return
	}
	ns, name := seg[0], seg[2]
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	rel := &v1alpha1.Release{}
	if err := kube().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rel); err != nil {
		if apierrors.IsNotFound(err) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"details":{"name":"` + name + `","group":"convoy.kumodo.io","kind":"releases"}}`))
			return
		}
		writeStatus(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	now := time.Now()
	patch := client.MergeFrom(rel.DeepCopy())
	if rel.Annotations == nil {
		rel.Annotations = map[string]string{}
	}
	rel.Annotations[v1alpha1.SyncRequestedAtAnnotation] = now.UTC().Format(time.RFC3339Nano)
	if err := kube().Patch(ctx, rel, patch); err != nil {
		writeStatus(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	s.mu.Lock()
	s.log[ns+"/"+name] = append(s.log[ns+"/"+name], now)
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// since returns the number of requests for key served at or after t.
func (s *syncAPI) since(key string, t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.log[key] {
		if !at.Before(t) {
			n++
		}
	}
	return n
}
