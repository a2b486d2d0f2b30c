// Command demo is the demo driver behind `make demo`: it starts a local control plane
// (etcd and kube-apiserver from hack/controlplane.sh), installs the CRDs and the default
// health rules (health/convoy-defaults.yaml), writes an admin kubeconfig and waits for
// Ctrl-C. With --once it exits as soon as the control plane is ready.
//
// It is a development tool, not a product component.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/kumodo/convoy-observer/internal/testenv"
)

func main() {
	once := flag.Bool("once", false, "exit as soon as the control plane is ready")
	flag.Parse()
	if err := run(*once); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run(once bool) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	fmt.Println("demo: starting a local control plane (etcd + kube-apiserver) ...")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer env.Stop()
	rules := filepath.Join(env.RepoRoot, "health", "convoy-defaults.yaml")
	if err := testenv.ApplyFile(ctx, env.Client, rules, "convoy-demo"); err != nil {
		return err
	}
	kubeconfig, err := env.AdminKubeconfig()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "convoy-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return err
	}
	fmt.Printf("demo: control plane ready at %s; CRDs and the convoy-defaults rule set installed.\n", env.Config.Host)
	fmt.Printf("demo: kubeconfig: %s\n", path)
	if once {
		return nil
	}
	fmt.Println("demo: press Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}
