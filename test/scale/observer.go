package scale

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// startObserver runs the binary against the control plane, with a stub sync endpoint,
// and returns it with the URL of its metrics; r.pprof is the address of its pprof
// endpoint (the live heap after a collection, liveHeap).
func (r *run) startObserver(ctx context.Context) (*exec.Cmd, string, error) {
	kc, err := r.env.AdminKubeconfig()
	if err != nil {
		return nil, "", err
	}
	kcPath := filepath.Join(r.dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return nil, "", err
	}
	sync := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.syncs.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	go func() { <-ctx.Done(); sync.Close() }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, "", err
	}
	r.pprof = ln.Addr().String()
	ln.Close()
	args := append([]string{"--kubeconfig", kcPath, "--sync-url", sync.URL,
		"--metrics-bind-address", metricsAddr, "--pprof-bind-address", r.pprof, "--health-probe-bind-address", "0", "--v", "0"}, r.cfg.Args...)
	cmd := exec.Command(r.cfg.Binary, args...)
	logf, err := os.Create(filepath.Join(r.dir, "observer.log"))
	if err != nil {
		return nil, "", err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	return cmd, "http://" + metricsAddr + "/metrics", nil
}

func stopObserver(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// copyLog keeps the observer's log next to the working directory after a failure.
func (r *run) copyLog() {
	b, err := os.ReadFile(filepath.Join(r.dir, "observer.log"))
	if err != nil {
		return
	}
	name := fmt.Sprintf("bench-scale-observer-N%d.log", r.cfg.Releases)
	if r.cfg.Floor {
		name = fmt.Sprintf("bench-scale-floor-N%d.log", r.cfg.Releases)
	}
	if err := os.WriteFile(filepath.Join(os.TempDir(), name), b, 0o644); err == nil {
		r.logf("observer log: %s", filepath.Join(os.TempDir(), name))
	}
}
