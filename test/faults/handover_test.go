package faults

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// replicaPrefix starts the path of the sync endpoint that replica i of a handover world
// uses ("/replica-<i>"), so that the endpoint's log says which replica sent a request.
const replicaPrefix = "replica-"

// leaderElectionArgs are the flags of a replica of the one shard: a short lease, so that
// a killed leader is replaced within seconds.
func leaderElectionArgs(ns string) []string {
	return []string{"--leader-elect", "--leader-elect-resource-namespace", ns,
		"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms"}
}

// leadTimeout bounds the wait for a replica to lead: the lease expires 3s after the
// leader's last renewal.
const leadTimeout = 30 * time.Second

// leads reports whether the observer's current run acquired the Lease (client-go's
// leader election logs it). The test uses it to choose whom to kill; the invariants are
// checked from the API server's and the sync endpoint's side.
func (o *observer) leads() bool {
	b, _ := os.ReadFile(o.logs[len(o.logs)-1])
	return strings.Contains(strings.ToLower(string(b)), "successfully acquired lease")
}

// waitLeader returns the replica that leads, waiting for one up to leadTimeout.
func (w *world) waitLeader(t *testing.T, among ...int) int {
	t.Helper()
	deadline := time.Now().Add(leadTimeout)
	for time.Now().Before(deadline) {
		for _, i := range among {
			if w.reps[i].obs.leads() {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no replica among %v leads after %v", among, leadTimeout)
	return -1
}

// injectHandover kills the leader of the two replicas with SIGKILL in the middle of the
// round; the fault ends when the other replica leads, and the killed one comes back as
// a standby. Convergence counts from the kill, so it includes the wait for the lease to
// expire.
func injectHandover(t *testing.T, w *world, _ string) func() time.Time {
	leader := w.waitLeader(t, 0, 1)
	w.reps[leader].obs.kill()
	killed := time.Now()
	w.kills = append(w.kills, kill{rep: leader, at: killed})
	return func() time.Time {
		w.waitLeader(t, 1-leader)
		t.Logf("replica %d killed; replica %d leads %v later", leader, 1-leader, time.Since(killed).Round(10*time.Millisecond))
		w.reps[leader].obs.start()
		return killed
	}
}

// kill is the SIGKILL of one replica.
type kill struct {
	rep int
	at  time.Time
}

// oneWriter checks that no two replicas write at once: in the time order of every
// write of the observer's own objects (through each replica's proxy) and every sync
// request (by the replica's path to the sync endpoint), another replica than the last
// writer writes only after the last writer was killed. It returns what broke it.
func (w *world) oneWriter() []string {
	type event struct {
		at   time.Time
		rep  int
		what string // "" for a kill
	}
	var evs []event
	for i, r := range w.reps {
		for _, wr := range r.proxy.writesLog() {
			evs = append(evs, event{wr.at, i, wr.what})
		}
	}
	for key, reqs := range w.api.all() {
		for _, s := range reqs {
			if i, err := strconv.Atoi(strings.TrimPrefix(s.from, replicaPrefix)); err == nil {
				evs = append(evs, event{s.at, i, "sync request of " + key})
			}
		}
	}
	for _, k := range w.kills {
		evs = append(evs, event{k.at, k.rep, ""})
	}
	slices.SortStableFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })
	var out []string
	last, alive := -1, false
	for _, e := range evs {
		switch {
		case e.what == "":
			if e.rep == last {
				alive = false
			}
			continue
		case last >= 0 && e.rep != last && alive:
			out = append(out, fmt.Sprintf("replica %d wrote (%s at %s) while replica %d, which wrote last, was alive",
				e.rep, e.what, e.at.Format("15:04:05.000"), last))
		}
		last, alive = e.rep, true
	}
	return out
}
