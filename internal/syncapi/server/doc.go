// Package server answers the Release subresources /sync and /health (Endpoints) from
// the namespace and name that convoy-api's generic server hands it (package
// apiserver installs it: health as a rest.Getter, sync as a rest.Connecter, and the
// generic server routes, authenticates and authorizes every request and serves
// discovery, OpenAPI, the probes and the 404s and 405s). It does no routing of its own.
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
// Why decidedBy and rulesApplied come from the inventory too: the observer records them
// on each entry with its state (the field manager convoy-health-inventory), so /health
// shows the rule that decided the very state it shows. Computing them per request would
// need the target's objects and the rule sets: convoy-api would hold credentials for every
// target cluster, build clients from tenants' kubeconfigs on a GET that any viewer may
// send, and evaluate tenants' rules with its own identity. It holds none of that: it
// reads Releases and ReleaseInventories only.
//
// Use:
//
//	e := server.NewEndpoints(c) // c: a controller-runtime client; e.Reader may be a cache
//	h, err := apiserver.NewUnauthenticatedHandler(e) // in tests; convoy-api: apiserver.New
package server
