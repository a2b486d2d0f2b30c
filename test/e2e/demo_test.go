package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kumodo/convoy-observer/internal/localcluster"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// demoTimeout is the demo's own --timeout; runTimeout bounds a run from the outside.
const (
	demoTimeout = 3 * time.Minute
	runTimeout  = demoTimeout + time.Minute
)

// TestDemoOnce runs `demo --once` (make demo ARGS=--once) and checks that it reached
// every expected state — every object Healthy after the good render, the hook
// Succeeded, a sync request for each wave and the hook, the bad Deployment Progressing
// then Degraded with the diagnosis of its unschedulable Pod, after a rollback the
// crash-looping one Degraded at once by failFast, convoyctl release wait exiting 0 then
// 3, the Release's Events — and
// that no process nor state outlives it. Its Pods crash 2 s after they are created
// (--crash-after), so the observer's pass whose advanced render sends r4's sync request
// comes before Degraded, every time: the demo's step must take that request (it waited
// for another one, which never comes). test/install plays the crash at once.
func TestDemoOnce(t *testing.T) {
	env := setup(t)
	r := env.start(t, "--once", "--timeout="+demoTimeout.String(), "--crash-after=2s")
	err := r.wait(runTimeout)
	out := r.output()
	if err != nil {
		t.Fatalf("demo --once failed: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`demo: PASS in `),
		regexp.MustCompile(`r1 wave 0 +\S+ +[1-9]\d* sync request`),
		regexp.MustCompile(`hook db-migrate +\S+ +[1-9]\d* sync request`),
		regexp.MustCompile(`r1 wave 1 +\S+ +[1-9]\d* sync request`),
		regexp.MustCompile(`r2 wave 0 +\S+ +[1-9]\d* sync request`),
		regexp.MustCompile(`Healthy=True \(Healthy\): 5/5 healthy`),
		regexp.MustCompile(`db-migrate +Job demo/db-migrate +Succeeded`),
		regexp.MustCompile(`Deployment +demo +web +Progressing +r2 `),
		regexp.MustCompile(`Deployment +demo +web +Degraded +r2 `),
		regexp.MustCompile(`final state: Healthy=False \(Degraded\); 5 entries: 4 Healthy, 0 Progressing, 1 Degraded, 0 Unknown`),
		// convoyctl release wait, as a pipeline runs it: Healthy at r1, Degraded at once at r2.
		regexp.MustCompile(`release demo/demo is Healthy: 5/5 healthy`),
		regexp.MustCompile(`convoyctl release wait exited 0`),
		regexp.MustCompile(`convoyctl release wait exited 3`),
		// The Release's Events, as kubectl describe shows them.
		regexp.MustCompile(`Normal +HookSucceeded +\S+ +convoy-observer +hook db-migrate \(Job demo/db-migrate\) succeeded`),
		regexp.MustCompile(`Normal +Healthy +\S+ +convoy-observer +5/5 healthy`),
		regexp.MustCompile(`Warning +Degraded +\S+ +convoy-observer +4/5 healthy; 1 Degraded: Deployment demo/web`),
		// The diagnosis names the Pod the scheduler refused, and at r4 the crash-looping
		// one, Degraded at once with failFast.
		regexp.MustCompile(`Deployment demo/web: Pod demo/web-\S+: not scheduled: Unschedulable: 0/2 nodes are available`),
		regexp.MustCompile(`r4 wave 1 +\S+ +[1-9]\d* sync request`),
		regexp.MustCompile(`Deployment demo/web: Pod demo/web-\S+: container web waiting: CrashLoopBackOff`),
		regexp.MustCompile(`Deployment demo/web: rule 0 of GlobalHealthRuleSet/convoy-defaults \(FailedFast\)`),
		regexp.MustCompile(`Warning +Degraded +\S+ +convoy-observer +4/5 healthy; 1 Degraded: Deployment demo/web: .* — Pod demo/web-\S+: container web waiting: CrashLoopBackOff`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the output lacks %q", want)
		}
	}
	checkCleanedUp(t, r)
	if t.Failed() {
		t.Logf("output of the demo:\n%s", out)
	} else {
		t.Logf("demo report:\n%s", grepLines(out, "demo: "))
	}
}

// TestDemoTimeout gives the demo too little time (the bad Deployment alone needs its
// 20 s deadline) and checks that it fails, says what was still missing, and still
// stops every process it started and removes its state.
func TestDemoTimeout(t *testing.T) {
	t.Parallel()
	env := setup(t)
	r := env.start(t, "--once", "--timeout=25s")
	err := r.wait(runTimeout)
	out := r.output()
	if err == nil {
		t.Errorf("the demo exited 0 although --timeout=25s is too short")
	}
	if !strings.Contains(out, "timed out") {
		t.Errorf("the output does not say the demo timed out")
	}
	if strings.Contains(out, "still missing:") != strings.Contains(out, "timed out in step") {
		t.Errorf("a step that timed out does not say what was still missing")
	}
	checkCleanedUp(t, r)
	if t.Failed() {
		t.Logf("output of the demo:\n%s", out)
	}
}

// TestDemoInterrupted interrupts the demo (SIGINT, as Ctrl-C does) once its cluster,
// convoy-api and convoy-observer run, and checks that it stops every process it
// started and removes its state.
func TestDemoInterrupted(t *testing.T) {
	t.Parallel()
	env := setup(t)
	r := env.start(t, "--once", "--timeout="+demoTimeout.String())
	if !r.waitOutput("Release demo/demo created", demoTimeout) { // the demo's own bound: builds take minutes on a busy machine
		_ = r.cmd.Process.Kill()
		t.Fatalf("the demo did not get to create its Release:\n%s", r.output())
	}
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("sending SIGINT: %v", err)
	}
	err := r.wait(time.Minute)
	out := r.output()
	if err == nil {
		t.Errorf("the interrupted demo exited 0")
	}
	if !strings.Contains(out, "interrupted") {
		t.Errorf("the output does not say the demo was interrupted")
	}
	checkCleanedUp(t, r)
	if t.Failed() {
		t.Logf("output of the demo:\n%s", out)
	}
}

// demoEnv is what the tests share: the repository, the control plane and the demo.
type demoEnv struct {
	root, assets, bin string
}

var (
	envOnce sync.Once
	env     demoEnv
	envErr  error
	// buildDir holds the demo binary; TestMain removes it.
	buildDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// setup finds the control plane and builds the demo once for all tests. Missing
// binaries fail the test: they are part of the test environment (make test).
func setup(t *testing.T) *demoEnv {
	t.Helper()
	envOnce.Do(func() {
		env.root, envErr = testenv.RepoRoot()
		if envErr != nil {
			return
		}
		if env.assets, envErr = localcluster.FindAssets(env.root); envErr != nil {
			return
		}
		if buildDir, envErr = os.MkdirTemp("", "convoy-e2e-"); envErr != nil {
			return
		}
		env.bin = filepath.Join(buildDir, "demo")
		args := []string{"build", "-o", env.bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./hack/demo")...)
		cmd.Dir = env.root
		if out, err := cmd.CombinedOutput(); err != nil {
			envErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if envErr != nil {
		t.Fatalf("setting up the demo: %v", envErr)
	}
	return &env
}

// demoRun is one running demo.
type demoRun struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// start starts the demo with args; with -race it also builds the components with the
// race detector.
func (e *demoEnv) start(t *testing.T, args ...string) *demoRun {
	t.Helper()
	if raceEnabled {
		args = append(args, "--race")
	}
	r := &demoRun{out: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(e.bin, args...)
	r.cmd.Dir = e.root
	r.cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+e.assets)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	// If this test binary dies, the demo is told to clean up.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting the demo: %v", err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			<-r.done
		}
	})
	return r
}

// wait waits for the demo to exit and returns its error. After timeout it interrupts
// the demo (which then cleans up) and reports the timeout.
func (r *demoRun) wait(timeout time.Duration) error {
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
	}
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	return fmt.Errorf("the demo did not finish within %s", timeout)
}

// waitOutput waits until the output contains s, the demo exits, or timeout passes.
func (r *demoRun) waitOutput(s string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !strings.Contains(r.output(), s) {
		select {
		case <-ctx.Done():
			return false
		case <-r.done:
			return strings.Contains(r.output(), s)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return true
}

// output returns what the demo printed so far.
func (r *demoRun) output() string { return r.out.String() }

// stateDirPattern finds the demo's state directory in its output.
var stateDirPattern = regexp.MustCompile(`demo: state directory (\S+);`)

// checkCleanedUp checks that the exited demo left no process running with its state
// directory on the command line (every process it starts has it: etcd's data, the
// API server's certificates, the kubeconfig, the built binaries) and removed the
// directory.
func checkCleanedUp(t *testing.T, r *demoRun) {
	t.Helper()
	m := stateDirPattern.FindStringSubmatch(r.output())
	if m == nil {
		t.Errorf("the output does not name the state directory")
		return
	}
	dir := m[1]
	if left := processesMentioning(dir); len(left) > 0 {
		t.Errorf("processes left behind by the demo:\n%s", strings.Join(left, "\n"))
		for _, p := range left {
			var pid int
			if _, err := fmt.Sscan(p, &pid); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the state directory %s still exists (stat: %v)", dir, err)
		_ = os.RemoveAll(dir)
	}
}

// processesMentioning lists "PID COMMAND LINE" of the processes whose command line
// contains s.
func processesMentioning(s string) []string {
	var out []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		data, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(data, []byte(s)) {
			continue
		}
		pid := filepath.Base(filepath.Dir(f))
		out = append(out, pid+" "+string(bytes.ReplaceAll(bytes.TrimRight(data, "\x00"), []byte{0}, []byte{' '})))
	}
	return out
}

// grepLines returns the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
