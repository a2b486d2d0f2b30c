// Command convoyctl is the command line of convoy-observer.
//
//	convoyctl health eval --rules FILE [--rules FILE…] --object FILE [--object FILE…]
//	    [--deadline D] [--first-unhealthy T] [--now T]
//
// evaluates health rule sets against objects read from files, exactly as the health loop
// does, and prints one JSON object per line (docs/design.md, "Command line"). Exit status:
// 0 when everything was evaluated (whatever the states), 1 when a rule set does not
// compile, 2 on a usage error or unreadable input, 130 when SIGINT or SIGTERM stopped it.
//
//	convoyctl health lint FILE… [--kubeconfig F]
//
// compiles rule sets and type-checks each rule against its resources' schema (exit 0
// clean, 1 on an error finding, 2 on bad input).
//
//	convoyctl health test PATH… [--junit FILE]
//
// runs test cases of rules (objects and the state, message and deciding rule they must
// get; docs/rules.md, "Testing rules"): a PASS or FAIL line per case, exit 0 when every
// case passed, 1 when one failed or rules do not compile, 2 on an invalid test file.
//
//	convoyctl health coverage --rules FILE|DIR… (--object FILE|DIR… | --kind APIVERSION/KIND…)
//	convoyctl health coverage --kubeconfig F [-n NS] [--served] [--rules FILE|DIR…]
//
// lists the kinds that no selected rule judges (their objects pass unjudged), from files
// or from a cluster's Releases and served resources: exit 0 when every kind is judged,
// 3 when some kind is not, 1 when rules do not compile or the cluster cannot be read, 2
// on bad input.
//
//	convoyctl release status NAME [-n NS] [--watch]
//	convoyctl release wait NAME [-n NS] [--for healthy|degraded|condition=REASON] [--timeout D]
//
// read a Release's health from the /health subresource; wait exits 0 when the state is
// reached, 1 when the health cannot be read, 3 when the Release turns Degraded while
// waiting for healthy, 4 on timeout (see `convoyctl release wait --help`).
//
// Every subcommand is a cobra command built by a newXCommand(*cliEnv) function in its own
// file and hung under its group; a new group
// adds its own file and one AddCommand call in newRootCommand.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Exit statuses (docs/design.md, "Command line").
const (
	exitOK           = 0
	exitCompileError = 1
	exitUsage        = 2
	// exitInterrupted: health eval stopped by SIGINT or SIGTERM (128 + SIGINT, as shells
	// report an interrupted command).
	exitInterrupted = 130
)

func main() {
	// Ctrl-C (or SIGTERM) ends release status --watch and release wait cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runNamed(ctx, commandName(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// pluginBinary is the name of the binary as a kubectl plugin: kubectl runs
// `kubectl convoy ARGS…` as `kubectl-convoy ARGS…` found on $PATH (make kubectl-convoy,
// or the krew manifest of make release).
const pluginBinary = "kubectl-convoy"

// commandName returns the name the command was called by, from argv0 (its path): "kubectl
// convoy" for the plugin binary (with or without .exe), else "convoyctl".
func commandName(argv0 string) string {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") == pluginBinary {
		return "kubectl convoy"
	}
	return "convoyctl"
}

// cliEnv is what the commands read and write; tests replace it.
type cliEnv struct {
	name   string // the command's name in help and errors: convoyctl, or kubectl convoy
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time // the default of --now
	conn   *connection      // kubectl's connection flags, set by newRootCommand
}

// exitError carries the exit status of a failed command.
type exitError struct {
	code int
	err  error
	hint bool // print the pointer to --help after the message
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a usage error (exit 2, with a pointer to --help).
func usageError(err error) error { return &exitError{code: exitUsage, err: err, hint: true} }

// inputError marks err as unreadable input (exit 2).
func inputError(err error) error { return &exitError{code: exitUsage, err: err} }

// run executes convoyctl with args (without the program name) and returns the exit
// status. Errors go to stderr as one "convoyctl: …" line (sanitized: an error may quote
// a rule or an object, and a line of a CEL error stays its own line). An error that no command
// classified (cobra's unknown command, bad flag, missing required flag) is a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with a context that ends long-running commands when it is done.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runNamed(ctx, "convoyctl", args, stdout, stderr)
}

// runNamed is runContext for the command called name (commandName).
func runNamed(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	env := &cliEnv{name: name, stdout: stdout, stderr: stderr, now: time.Now}
	root := newRootCommand(env)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, sanitizeLines(err.Error()))
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.hint {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	return exitUsage
}
