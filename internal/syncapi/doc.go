// Package syncapi answers the Release subresources /sync and /health of convoy-api
// (docs/design.md, "Sync and health endpoints"): Endpoints, their bodies SyncResponse and
// HealthResult, and the Client that the health loop and convoyctl use to call them.
//
// The paths are an aggregated API, so that an APIService for
// subresources.convoy.kumodo.io/v1alpha1 puts them behind the kube-apiserver:
//
//	POST /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/sync
//	GET  /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/health
//
// This package does no routing: package apiserver installs Endpoints in a
// k8s.io/apiserver generic server (health as a rest.Getter, sync as a rest.Connecter),
// which routes, authenticates and authorizes every request and serves discovery,
// OpenAPI, the probes and the 404s and 405s.
//
// Why /sync is a merge patch of one annotation: the controller-manager watches its
// Releases, so a new value of convoy.kumodo.io/sync-requested-at wakes it, and a JSON
// merge patch without a resourceVersion never conflicts with the controller-manager's
// own writes and never touches another field. The value is the request time in
// SyncTimeFormat (RFC 3339 with nine digits of nanoseconds, UTC) from Endpoints.Now, so every
// request changes it.
//
// Why /health does not assess (docs/design.md, "The write protocol"): the health loop is the
// only writer of assessments; BuildHealthResult is a pure function that turns what the loop
// wrote into the ReleaseInventory into a response. It shows only the entries and hooks
// that the controller-manager still records (inventory.RecordedEntries): Server-Side
// Apply keeps an element alive while the observer's field manager still owns some of
// its fields, and such a leftover must not appear in /health or in its summary.
//
// Why decidedBy and rulesApplied are computed per request (Explainer): the inventory
// schema stays as the contract fixes it, so which rule decided an entry, and how many
// rules judge it, are not stored; re-evaluating the rules of the entries that are not
// Healthy, with the loop's own selection (rulesets.Collect), evaluator and state
// derivation (health.Judge), gives the same answer the loop would
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
// Use:
//
//	e := syncapi.NewEndpoints(c) // c: a controller-runtime client; e.Reader may be a cache
//
//	cl := syncapi.NewClient(cfg) // cfg: a kubeconfig's; through the kube-apiserver
//	err := cl.RequestSync(ctx, "default", "demo")
//	health, err := cl.Health(ctx, "default", "demo")
package syncapi
