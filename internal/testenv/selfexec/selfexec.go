// Package selfexec runs a command's test binary as the command itself, so a test sees
// what the real process does (its exit status, what it writes to stdout and stderr, how
// it takes a signal) without building the binary first.
//
// TestMain calls MainIfChild first; a test then starts the binary with Run (the whole
// process, waited for) or Command (an exec.Cmd the test drives itself):
//
//	func TestMain(m *testing.M) {
//		selfexec.MainIfChild(main)
//		os.Exit(m.Run())
//	}
//
//	stdout, stderr, code := selfexec.Run(t, nil, "--kubeconfig", missing)
package selfexec

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// childEnv marks a process started by Command or Run: its TestMain runs main instead of
// the tests.
const childEnv = "CONVOY_TEST_RUN_MAIN"

// RunTimeout bounds a process started by Run: one that wrongly starts serving instead of
// exiting is killed after it, rather than waited for.
const RunTimeout = time.Minute

// MainIfChild runs main and exits with status 0 (unless main exits itself) when this
// process was started by Command or Run; otherwise it returns at once. Call it first in
// TestMain, before anything the tests set up.
func MainIfChild(main func()) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
}

// Command returns this test binary as a command that runs main with args and exactly the
// environment env (pass os.Environ() to inherit this process's). ctx kills the process
// when it is done, as exec.CommandContext does.
func Command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append([]string{}, env...), childEnv+"=1")
	return cmd
}

// Run runs this test binary as main with args and exactly the environment env, plus HOME
// set to a fresh temporary directory, and returns its stdout, its stderr and its exit
// status: -1 when it was killed after RunTimeout. It fails the test when the process
// cannot be started.
func Run(t testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	cmd := Command(ctx, append([]string{"HOME=" + t.TempDir()}, env...), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}
