// Package fairshare keeps one tenant namespace from slowing down another's Releases
// (docs/operations.md, "Tenants and fairness"), at the two places where they compete:
//
//   - the work queue (NewQueue): controller-runtime's priority queue whose keys are
//     served round-robin across namespaces, weighted, so a quiet namespace's Release
//     waits behind at most a key or two of each busy one, not behind their backlogs;
//   - the rule evaluations (Gate): at most a number of slots run at once, granted by
//     start-time fair queuing on the CPU each namespace's evaluations used, divided by
//     its weight;
//   - the weight of a namespace (NamespaceWeights, ParseWeight): a positive number up to
//     1000 from a label of its Namespace, 1 by default.
//
// The per-pass evaluation budget, which bounds one Release, is the health loop's
// (package healthloop, fair.go).
package fairshare
