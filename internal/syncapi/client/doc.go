// Package client calls convoy-api's Release subresources: Client.RequestSync (POST
// …/releases/{name}/sync) and Client.Health (GET …/releases/{name}/health, decoded into
// a syncapi.HealthResult), through the kube-apiserver's aggregation layer or directly
// (DirectConfig). The health loop and convoyctl use it; it links none of the server.
//
// Use:
//
//	cl := client.NewClient(cfg) // cfg: a kubeconfig's; through the kube-apiserver
//	err := cl.RequestSync(ctx, "default", "demo")
//	health, err := cl.Health(ctx, "default", "demo")
package client
