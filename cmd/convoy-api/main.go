// Command convoy-api serves the Release subresources of convoy-observer:
//
//	POST /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/sync
//	GET  /apis/subresources.convoy.kumodo.io/v1alpha1/namespaces/{ns}/releases/{name}/health
//
// (CONTRACT §2, "Sync and health endpoints"; see package internal/subresources).
//
//	convoy-api [--kubeconfig F] [--bind-address HOST:PORT]
//	    [--tls-cert-file F --tls-private-key-file F] [--v N]
//
// Without --kubeconfig it uses the in-cluster config. It serves plain HTTP unless both
// TLS flags are given, logs to stderr, and shuts down gracefully on SIGINT or SIGTERM.
// Exit status: 0 after a graceful shutdown, 1 when it cannot start or serve, 2 on a
// usage error.
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
