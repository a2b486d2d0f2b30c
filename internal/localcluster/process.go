package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultStopTimeout is how long Stop waits after SIGTERM before it sends SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// Process is a child process in its own process group, with its standard output and
// error in a log file. It is stopped (the whole group) by Stop, when the context it was
// started with is done, and by the kernel when the process that started it dies
// (Pdeathsig), so that nothing outlives the program that started it.
type Process struct {
	// Name names the process in messages.
	Name string
	// LogPath is the file holding its standard output and error.
	LogPath string

	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
	stopping chan struct{}
	mu       sync.Mutex
	waitErr  error
}

// StartProcess starts path with args as name, logging to logPath (created or truncated).
// The process is stopped when ctx is done.
func StartProcess(ctx context.Context, name, path string, args []string, logPath string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the log of %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group: a terminal's Ctrl-C reaches only us, and we stop the children
		// in order; Stop signals the whole group, so grandchildren go too.
		Setpgid: true,
		// A safety net for when this program is killed without a chance to clean up.
		// The Go runtime does not end the threads that start processes.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{}), stopping: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = p.Stop()
		case <-p.done:
		}
	}()
	return p, nil
}

// Pid returns the process id, which is also its process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited returns an error describing the exit of a process that ended on its own
// (with the end of its log), or nil while it runs or after Stop.
func (p *Process) Exited() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	select {
	case <-p.stopping:
		return nil
	default:
	}
	p.mu.Lock()
	err := p.waitErr
	p.mu.Unlock()
	status := "exited"
	if err != nil {
		status = err.Error()
	}
	return fmt.Errorf("%s stopped unexpectedly (%s); the end of %s:\n%s", p.Name, status, p.LogPath, p.LogTail(15))
}

// Stop sends SIGTERM to the process group, waits up to DefaultStopTimeout and then
// sends SIGKILL to the group. It returns once the process has exited; it is safe to
// call more than once and from several goroutines. (The processes started here do not
// fork, so the group ends with its leader.)
func (p *Process) Stop() error {
	p.stopOnce.Do(func() { close(p.stopping) })
	select {
	case <-p.done:
		return nil // reaped: its group id may belong to someone else by now
	default:
	}
	killGroup(p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(DefaultStopTimeout):
	}
	killGroup(p.Pid(), syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.Pid())
	}
}

// killGroup signals the process group pgid; a group that is gone already is not an
// error.
func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	return TailFile(p.LogPath, n)
}

// TailFile returns the last n lines of the file at path (at most its last 64 KiB), or
// a note saying why it cannot be read.
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const maxTail = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > maxTail {
		_, _ = f.Seek(fi.Size()-maxTail, io.SeekStart)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(bytes.ToValidUTF8(data, []byte("?"))), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(empty)"
	}
	return "    " + strings.Join(lines, "\n    ")
}
