package scale

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// observer is one running observer process.
type observer struct {
	cmd        *exec.Cmd
	metricsURL string
	pprof      string // the address of its pprof endpoint (liveHeap)
	log        string // its log file
}

// startObserver runs the binary against the control plane, with a stub sync endpoint,
// for shard ("" the default shard: no --shard flag).
func (r *run) startObserver(ctx context.Context, shard string) (*observer, error) {
	kc, err := r.env.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	kcPath := filepath.Join(r.dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return nil, err
	}
	sync := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.syncs.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	go func() { <-ctx.Done(); sync.Close() }()
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", kcPath, "--sync-url", sync.URL,
		"--metrics-bind-address", metricsAddr, "--pprof-bind-address", pprofAddr, "--health-probe-bind-address", "0", "--v", "0"}
	name := "observer.log"
	if shard != "" {
		args = append(args, "--shard", shard)
		name = "observer-" + shard + ".log"
	}
	cmd := exec.Command(r.cfg.Binary, append(args, r.cfg.Args...)...)
	logPath := filepath.Join(r.dir, name)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &observer{cmd: cmd, metricsURL: "http://" + metricsAddr + "/metrics", pprof: pprofAddr, log: logPath}, nil
}

// freeAddr returns a local address that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// observers are the processes of a run, one per shard; each figure is their sum.
type observers []*observer

func (ps observers) stop() {
	for _, o := range ps {
		stopObserver(o.cmd)
	}
}

// exited returns an error when one of them exited.
func (ps observers) exited() error {
	for _, o := range ps {
		if o.cmd.ProcessState != nil {
			return fmt.Errorf("convoy-observer exited: see %s", o.log)
		}
	}
	return nil
}

func (ps observers) cpu() time.Duration {
	var sum time.Duration
	for _, o := range ps {
		d, _ := cpuTime(o.cmd.Process.Pid)
		sum += d
	}
	return sum
}

func (ps observers) status(field string) uint64 {
	var sum uint64
	for _, o := range ps {
		v, _ := procStatus(o.cmd.Process.Pid, field)
		sum += v
	}
	return sum
}

func (ps observers) sockets() int {
	sum := 0
	for _, o := range ps {
		n, _ := sockets(o.cmd.Process.Pid)
		sum += n
	}
	return sum
}

func (ps observers) process(ctx context.Context) process {
	var sum process
	for _, o := range ps {
		if p, err := observerProcess(ctx, o.metricsURL); err == nil {
			sum.goroutines += p.goroutines
			sum.heapInuse += p.heapInuse
			sum.passes += p.passes
		}
	}
	return sum
}

func (ps observers) reads(ctx context.Context) counts {
	sum := counts{}
	for _, o := range ps {
		c, _ := observerReads(ctx, o.metricsURL)
		for k, v := range c {
			sum[k] += v
		}
	}
	return sum
}

// liveHeap is the sum of their live heaps; 0 when one did not answer.
func (ps observers) liveHeap(ctx context.Context) uint64 {
	var sum uint64
	for _, o := range ps {
		v, err := liveHeap(ctx, o.pprof)
		if err != nil {
			return 0
		}
		sum += v
	}
	return sum
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

// copyLog keeps the observer's log (the default shard's) next to the working directory.
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

// cpuProfile writes a CPU profile of the process whose pprof endpoint is at addr, over
// the first r.cfg.CPUProfile after its start, next to its log. It waits up to 5s for
// the endpoint to listen; a failure is logged, not returned (the figures stand).
func (r *run) cpuProfile(ctx context.Context, addr string) {
	r.saveProfile(ctx, "cpu", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(1, int(r.cfg.CPUProfile.Seconds()))))
}

// allocsProfile writes the heap profile of the process whose pprof endpoint is at addr
// next to its log: its alloc_space and alloc_objects count every allocation since the
// start (go tool pprof -sample_index=alloc_space), which the collector's CPU follows.
func (r *run) allocsProfile(ctx context.Context, addr string) {
	r.saveProfile(ctx, "heap", fmt.Sprintf("http://%s/debug/pprof/heap", addr))
}

// saveProfile writes the profile that url answers as bench-scale-{observer,floor}-N<N>.
// <kind>.pprof in the temporary directory. It waits up to 5s for the endpoint to
// listen; a failure is logged, not returned (the figures stand).
func (r *run) saveProfile(ctx context.Context, kind, url string) {
	side := "observer"
	if r.cfg.Floor {
		side = "floor"
	}
	name := fmt.Sprintf("bench-scale-%s-N%d.%s.pprof", side, r.cfg.Releases, kind)
	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); ; {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			r.logf("%s profile: %v", kind, err)
			return
		}
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.logf("%s profile: %v", kind, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.logf("%s profile: %s", kind, resp.Status)
		return
	}
	path := filepath.Join(os.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		r.logf("%s profile: %v", kind, err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		r.logf("%s profile: %v", kind, err)
		return
	}
	r.logf("%s profile: %s", kind, path)
}
