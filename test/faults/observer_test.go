package faults

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// observer is convoy-observer as a real process; restart replaces a killed one.
type observer struct {
	t       *testing.T
	args    []string
	logs    []string // one log file per start
	cmd     *exec.Cmd
	done    chan struct{}
	starts  int
	logsDir string
}

func startObserver(t *testing.T, kubeconfig, syncURL, namespace string, extra ...string) *observer {
	t.Helper()
	logsDir := t.TempDir()
	if d := os.Getenv("FAULTS_LOGS"); d != "" { // keep the logs for a post-mortem
		var err error
		if logsDir, err = os.MkdirTemp(d, strings.ReplaceAll(t.Name(), "/", "_")+"-*"); err != nil {
			t.Fatal(err)
		}
	}
	o := &observer{t: t, logsDir: logsDir, args: append([]string{
		"--kubeconfig", kubeconfig, "--sync-url", syncURL, "--namespace", namespace,
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--workers", "4",
		"--target-timeout", "2s", // a down target is noticed within seconds
	}, extra...)}
	o.start()
	t.Cleanup(o.stop)
	return o
}

func (o *observer) start() {
	o.t.Helper()
	o.starts++
	path := filepath.Join(o.logsDir, "observer-"+time.Now().Format("150405.000")+".log")
	f, err := os.Create(path)
	if err != nil {
		o.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(observerBin, o.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		o.t.Fatal(err)
	}
	o.cmd, o.logs, o.done = cmd, append(o.logs, path), make(chan struct{})
	done := o.done
	go func() { _ = cmd.Wait(); close(done) }()
}

// kill sends SIGKILL and waits for the process to be gone.
func (o *observer) kill() {
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	<-o.done
}

// stop ends the process with SIGTERM (SIGKILL after 10s).
func (o *observer) stop() {
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		o.kill()
	}
}

// exitedEarly reports whether the running observer has exited by itself.
func (o *observer) exitedEarly() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// panics returns the lines of every run's log that tell of a panic.
func (o *observer) panics() []string {
	var out []string
	for _, p := range o.logs {
		b, _ := os.ReadFile(p)
		for _, line := range bytes.Split(b, []byte("\n")) {
			if bytes.Contains(line, []byte("panic")) || bytes.Contains(line, []byte("Observed a panic")) {
				out = append(out, string(line))
			}
		}
	}
	return out
}

// races returns the race detector's reports in every run's log (a race-built observer
// prints them to stderr and goes on).
func (o *observer) races() []string {
	var out []string
	for _, p := range o.logs {
		b, _ := os.ReadFile(p)
		s := string(b)
		for {
			i := strings.Index(s, "WARNING: DATA RACE")
			if i < 0 {
				break
			}
			s = s[i:]
			end := strings.Index(s, "\n==================")
			if end < 0 {
				end = len(s)
			}
			out = append(out, s[:end])
			s = s[end:]
		}
	}
	return out
}

// tail returns the end of the current run's log, for a failure message.
func (o *observer) tail() string {
	b, _ := os.ReadFile(o.logs[len(o.logs)-1])
	lines := strings.Split(string(b), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
