// Package syncapi serves the HTTP endpoints of convoy-api, the Release
// subresources /sync and /health (docs/design.md, "Sync and health endpoints"), and holds
// the Client that the health loop and convoyctl use to call them.
//
// The paths are laid out as an aggregated API, so that an APIService for
// subresources.convoy.kumodo.io/v1alpha1 can put them behind the kube-apiserver:
//
//	POST /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/sync
//	GET  /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/health
//	GET  /apis/subresources.convoy.kumodo.io/v1alpha1   (discovery: an APIResourceList)
//	GET  /healthz                                       (probes: 200 "ok")
//
// Why /sync is a merge patch of one annotation: the controller-manager watches its
// Releases, so a new value of convoy.kumodo.io/sync-requested-at wakes it, and a JSON
// merge patch without a resourceVersion never conflicts with the controller-manager's
// own writes and never touches another field. The value is the request time in
// SyncTimeFormat (RFC 3339 with nine digits of nanoseconds, UTC) from Handler.Now, so every request changes it.
//
// Why /health does not assess (docs/design.md, "The write protocol"): the health loop is the
// only writer of assessments; HealthResult is a pure function that turns what the loop
// wrote into the ReleaseInventory into a response. It shows only the entries and hooks
// that the controller-manager still records (inventory.RecordedEntries): Server-Side
// Apply keeps an element alive while the observer's field manager still owns some of
// its fields, and such a leftover must not appear in /health or in its summary.
//
// Why decidedBy and rulesApplied are computed per request (Explainer): the inventory
// schema stays as the contract fixes it, so which rule decided an entry, and how many
// rules judge it, are not stored; re-evaluating the rules of the entries that are not
// Healthy, with the loop's own selection (rulesets.Collect), evaluator and state
// derivation (health.DeriveState, health.Explain), gives the same answer the loop would
// give now, and is bounded per request (DefaultExplainMaxEntries,
// DefaultExplainTimeout). Counting the rules that match each entry (rulesApplied, so
// that a Healthy entry that no rule judges shows as such) needs only the selection: one
// list of the rule sets per request, compiled once per selection, and no read of the
// target.
//
// Shapes where the contract is silent: every field of an entry or hook is serialized,
// even when empty (group and namespace must be, and a fixed shape is easier on
// clients); unset times (firstUnhealthy, createdAt, finishedAt) are null; an entry not
// assessed yet has state "" and counts as unknown in the summary. Errors are
// metav1.Status bodies, as any Kubernetes API answers them.
//
// Handler does no authentication or authorization of its own: convoy-api mounts it
// behind k8s.io/apiserver's delegated authentication and authorization (package
// apiserver), which also serve discovery, OpenAPI and the probes. On its own (tests), it
// serves anyone.
//
// Use:
//
//	h := syncapi.NewHandler(c) // c: a controller-runtime client; h.Reader may be a cache
//
//	cl := syncapi.NewClient(cfg) // cfg: a kubeconfig's; through the kube-apiserver
//	err := cl.RequestSync(ctx, "default", "demo")
//	health, err := cl.Health(ctx, "default", "demo")
package syncapi
