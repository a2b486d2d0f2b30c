// Package healthloop is the health loop of convoy-observer (docs/design.md, "The health loop"): the
// HealthController that, for every Release, reads the ReleaseInventory, reads each
// recorded object from the target cluster, evaluates the CEL health rules, and writes
// the result to the inventory entries and to the Release's Healthy condition with
// Server-Side Apply. It also polls the workloads of lifecycle hooks and wakes the
// controller-manager (POST …/sync) on the edges of "Wake the controller".
//
// One pass is (*HealthController).syncHandler: it reads (the Release, the shard gate, the
// inventory, the hooks' workloads, each entry's object, evaluated), decides with a pure
// function of what it read (decide: the hooks' status, the judged entries, the Healthy
// condition, the edges, what is still pending), writes (commit, through a committer,
// one method per write: hooks, entries, condition; then it settles the owed
// sync request), and records what the pass leaves in memory, metrics and Events only
// once the writes landed (recordPass). The files follow the concerns (docs/design.md,
// "Where each step lives"):
//
//   - controller.go: the wiring (SetupWithManager) and syncHandler;
//   - inventory.go, clusters.go: the inventory a pass reads; the Cluster, its shard and
//     what is remembered of it;
//   - hooks.go, hookoutcome.go: reading the hooks' workloads and the hooks write; their
//     states decided from those reads (decideHooks);
//   - assess.go, fair.go, targets.go: reading and evaluating the entries, the pass's
//     evaluation budget (the fair share across namespaces is package fairshare), and
//     which target objects each Release reads (a change of one of them queues exactly
//     the Releases that record it);
//   - decide.go: the decision of a pass, a pure function of what it read (decide);
//   - writes.go: the entries write and the Healthy condition;
//   - commit.go: the order of the writes and what a failed one means;
//   - owed.go: the owed sync request from the edge to its payment, whole; wake.go: the
//     edges and the answer of the sync endpoint;
//   - events.go: Kubernetes Events on the edges, recorded after the write they announce;
//   - recheck.go: the re-check backoff; memory.go: what the loop keeps per Release.
//
// Why the inventory and not the render: an object gets an assessment as soon as the
// controller-manager records it after the apply of its wave, and the anchors
// (firstUnhealthy) live in the inventory so that an observer restart never resets the
// clock of a failing object.
//
// In memory, per Release, the loop holds one releaseMemory (memory.go): the re-check
// attempt counts (kept in memory by design: a restart starts the backoff over), and what
// is kept only for speed: the last condition and entries digest it applied (a lagging
// cache may not show them yet), whether a sync request is armed, what it knows of the
// owed-sync record, the kind of the last edge that got an Event and whether the last
// pass hit its budget. What it reads from its target cluster is indexed by the cluster
// cache (Track). forget drops all of it (and untracks) when the Release is gone or its
// shard moves away. Per Cluster it holds the shard last seen, the Event budget and the outage
// flag, dropped with the last Release that names the Cluster (forgetCluster).
//
// Why an owed sync request is an annotation on the inventory and not a Flux-style
// requestedAt / lastHandledReconcileAt pair in status: the record must land in the very
// apply that persists the edge's state (one request, so a crash can never separate the
// state from its debt), the observer owns no status of the inventory and may write only
// the Healthy condition and healthSummary of the Release, and comparing the record's
// baseline with the Release's own sync-requested-at annotation already is the "last
// handled" half of that protocol, with no second write (docs/design.md, "The owed sync
// record").
package healthloop
