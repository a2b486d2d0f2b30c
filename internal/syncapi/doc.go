// Package syncapi holds what convoy-api and its callers share about the Release
// subresources /sync and /health (docs/design.md, "Sync and health endpoints"): the
// group-version, the paths, and the bodies SyncResponse and HealthResult. The server
// side is package server (what the endpoints answer) and package apiserver (convoy-api:
// routing, authentication, OpenAPI); the caller side is package client, which the
// health loop and convoyctl use, so that neither links the server.
//
// The paths are an aggregated API, so that an APIService for
// subresources.convoy.kumodo.io/v1alpha1 puts them behind the kube-apiserver:
//
//	POST /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/sync
//	GET  /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/health
//
// Shapes the published API leaves open: every field of an entry or hook is serialized,
// even when empty (group and namespace must be, and a fixed shape is easier on
// clients); unset times (firstUnhealthy, createdAt, finishedAt) are null; an entry not
// assessed yet has state "" and counts as unknown in the summary. Errors are
// metav1.Status bodies, as any Kubernetes API answers them.
package syncapi
