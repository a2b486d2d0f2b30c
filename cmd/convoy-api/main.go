// Command convoy-api serves the Release subresources of convoy-observer as an aggregated
// API server on k8s.io/apiserver (package internal/syncapi/apiserver):
//
//	POST /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/sync
//	GET  /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/health
//
// (docs/design.md, "Sync and health endpoints": HTTPS only, with delegated
// authentication and authorization), plus discovery, /openapi/v2 and /openapi/v3,
// /healthz, /livez and /readyz.
//
//	convoy-api [--kubeconfig F] [--secure-port 8443] [--bind-address IP]
//	    [--tls-cert-file F --tls-private-key-file F] [--authentication-kubeconfig F]
//	    [--authorization-kubeconfig F] [--kube-api-qps Q --kube-api-burst B] [--v N] ...
//
// Without --kubeconfig it uses the in-cluster config. --version prints the version, the
// commit and its date to stdout and exits. It logs to stderr and shuts down
// gracefully on SIGINT or SIGTERM. Exit status: 0 after a graceful shutdown, 1 when it
// cannot start or serve, 2 on a usage error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	os.Exit(code)
}
