// Package faults is the fault-injection suite of convoy-observer: a real
// kube-apiserver and etcd (internal/testenv), the observer as a real process, a stand-in
// sync endpoint that keeps its own log of sync requests, and a stand-in controller-manager
// that drives Releases through waves, a hook that is re-armed once, and a dropped entry.
// While it runs, one kind of fault is injected per round:
//
//   - proxy: an HTTP proxy between the observer and the API server answers a share of
//     the requests with 429 (Retry-After), 500 or 503, resets connections, adds latency
//     or holds connections open;
//   - conflicts: another field manager writes the inventory and the Release status at a
//     high rate, so the observer's preconditioned writes conflict;
//   - syncdown: the sync endpoint is down (connection refused) for a while;
//   - kill: the observer is killed with SIGKILL at a random point and restarted;
//   - compact: etcd is compacted at its head and the observer's connections are dropped,
//     so its watches resume from compacted resourceVersions, get 410 Gone and re-list
//     (kube-apiserver runs without its watch cache, so that etcd serves the watches);
//   - target: the Releases' objects live in a second kube-apiserver and etcd, a target
//     cluster reached through its own proxy (a kubeconfig Secret of the Cluster), and the
//     proxy's faults hit that way only; or the target goes down, and every Release must
//     turn Healthy=Unknown before it comes back. In the long form (or FAULTS_ROLLOUT=1)
//     the target also runs kube-controller-manager, kube-scheduler and kwok, so the hook
//     Jobs really run on a fake node;
//   - handover: two replicas of one shard with leader election; the leader is killed
//     with SIGKILL and comes back as a standby once the other leads;
//   - apiserver: kube-apiserver is stopped and started again (etcd keeps the data).
//
// After every round the invariants of the issue are checked from the API server and
// from the sync endpoint's log (never from the observer's log): every edge (a completed
// wave, a finished hook) is followed by a sync request, no firstUnhealthy anchor moves,
// no entry turns Degraded, an Unknown entry says it cannot read its object (a fault
// never makes an existing object look gone), no finished hook loses its state, a dropped
// entry is never revived, a steady Release gets no sync request, no two replicas write
// at once, the observer never panics nor (built with -race: the long form, or
// FAULTS_RACE=1) races, and every Release converges to the truth.
//
// `go test ./test/faults/` (part of `make test`) runs one short round of each fault;
// `make test-faults` (FAULTS_LONG=1) runs many rounds and prints the figures that
// docs/operations.md reports: rounds per fault and the time to converge after the fault
// ends (p50/p99). FAULTS_LOGS=DIR keeps every observer process's log under DIR.
package faults
