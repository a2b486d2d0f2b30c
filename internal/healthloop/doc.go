// Package healthloop is the health loop of convoy-observer (docs/design.md, "The health loop"): the
// HealthController that, for every Release, reads the ReleaseInventory, reads each
// recorded object from the target cluster, evaluates the CEL health rules, and writes
// the result to the inventory entries and to the Release's Healthy condition with
// Server-Side Apply. It also polls the workloads of lifecycle hooks and wakes the
// controller-manager (POST …/sync) on the edges of "Wake the controller".
//
// One pass is (*HealthController).syncHandler, in the spec's order: read the Release,
// shard gate, deletion, hooks, health, wake the controller, next pass. The files follow
// the concerns: controller.go (wiring and syncHandler), assess.go (assess and its
// steps), writes.go (the two Server-Side Apply writes and the Healthy condition),
// hooks.go (hook polling), wake.go (edges and /sync), recheck.go (re-check backoff),
// events.go (Kubernetes Events on the edges of the Healthy condition, finished hooks and
// unreachable clusters, recorded by commit after the writes), targets.go (which target
// objects each Release reads: the cluster cache watches their types, and a change of one
// of them queues exactly the Releases that record it; the re-check backoff stays as the
// safety net).
//
// Why the inventory and not the render: an object gets an assessment as soon as the
// controller-manager records it after the apply of its wave, and the anchors
// (firstUnhealthy) live in the inventory so that an observer restart never resets the
// clock of a failing object.
//
// In memory, per Release and only for speed or as the design keeps it there (the
// re-check attempt counts), the loop holds: the attempt counts, the last condition and
// entries digest it applied (a lagging cache may not show them yet), the owed-sync state
// and the last Event kind; forget drops all of them when the Release is gone or its
// shard moves away. Per Cluster it holds the shard last seen, the Event budget and the
// outage flag, dropped with the last Release that names the Cluster (forgetCluster).
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
