package faults

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// served is one request that the sync endpoint served.
type served struct {
	at   time.Time // when it arrived
	from string    // the replica that sent it (its path prefix, "replica-<i>"), or ""
}

// syncAPI is a stand-in for convoy-api's POST …/sync: it sets the sync annotation as
// convoy-api does and keeps its own log of the requests it served, which the invariants
// are checked against. It can be taken down (connection refused) and brought back on the
// same address.
type syncAPI struct {
	addr string
	mu   sync.Mutex
	log  map[string][]served // Release key → the served requests
	srv  *http.Server
	down bool
}

func newSyncAPI(t *testing.T) *syncAPI {
	t.Helper()
	s := &syncAPI{log: map[string][]served{}}
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

// serve answers POST …/sync (the path of syncapi.SyncPath) on ln, also below a first segment
// "replica-<i>" (a replica of a handover world), and 404 to anything else.
func (s *syncAPI) serve(ln net.Listener) {
	route := syncapi.PathPrefix + "/namespaces/{ns}/releases/{name}/" + syncapi.SubresourceSync
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+route, s.handle)
	mux.HandleFunc("POST /{replica}"+route, s.handle)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, http.StatusNotFound, "NotFound", "no such path")
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
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
	arrived, from, ns, name := time.Now(), r.PathValue("replica"), r.PathValue("ns"), r.PathValue("name")
	if from != "" && !strings.HasPrefix(from, replicaPrefix) {
		writeStatus(w, http.StatusNotFound, "NotFound", "no such path")
		return
	}
	// Not the request's context: a client that goes away (a replica killed while it
	// waits for the answer) must not leave a patch that landed unlogged, or the log
	// misses a sync request that moved the annotation, which is what the observer
	// reads as the payment of its debt.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	rel := &v1alpha1.Release{}
	if err := kube().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rel); err != nil {
		if apierrors.IsNotFound(err) {
			st := apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("releases").GroupResource(), name).Status()
			st.Kind, st.APIVersion = "Status", "v1"
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(st)
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
	s.log[ns+"/"+name] = append(s.log[ns+"/"+name], served{at: arrived, from: from})
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// since returns the number of requests for key served at or after t.
func (s *syncAPI) since(key string, t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.log[key] {
		if !r.at.Before(t) {
			n++
		}
	}
	return n
}

// all returns every served request, by Release key.
func (s *syncAPI) all() map[string][]served {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]served, len(s.log))
	for k, v := range s.log {
		out[k] = append([]served(nil), v...)
	}
	return out
}
