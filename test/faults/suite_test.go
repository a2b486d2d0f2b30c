package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kumodo/convoy-observer/internal/testenv"
)

var (
	env *testenv.Env
	// observerBin is the convoy-observer binary built for this run.
	observerBin string
	// long is set by `make test-faults` (FAULTS_LONG=1): many rounds of each fault.
	long = os.Getenv("FAULTS_LONG") != ""
	// race builds the observer with the race detector (a report fails the test): in the
	// long form, and in the short form with FAULTS_RACE=1.
	race = long || os.Getenv("FAULTS_RACE") != ""
)

// kubeMu guards env.Client and env.Config: a kube-apiserver restart comes back with new
// certificates, and the test's clients are rebuilt (reconnect).
var kubeMu sync.RWMutex

// kube returns the test's client of the API server (the stand-in controller-manager's).
func kube() client.Client {
	kubeMu.RLock()
	defer kubeMu.RUnlock()
	return env.Client
}

// restConfig returns the test's config of the API server.
func restConfig() *rest.Config {
	kubeMu.RLock()
	defer kubeMu.RUnlock()
	return env.Config
}

// reconnect rebuilds the test's client after kube-apiserver came back with new
// certificates, and returns the new config.
func reconnect() (*rest.Config, error) {
	kc, err := env.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	kubeMu.Lock()
	defer kubeMu.Unlock()
	env.Config, env.Client = cfg, c
	return cfg, nil
}

// rounds is the number of rounds of each fault: FAULTS_ROUNDS, else 1 (short) or 10
// (long).
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("FAULTS_ROUNDS")); err == nil && n > 0 {
		return n
	}
	if long {
		return 10
	}
	return 1
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "convoy-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	observerBin = filepath.Join(dir, "convoy-observer")
	args := []string{"build", "-o", observerBin}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/convoy-observer")...)
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building convoy-observer: %v\n", err)
		return 1
	}
	ctrllog.SetLogger(logr.Discard())
	// Without the watch cache, a watch that resumes is served by etcd itself, so an etcd
	// compaction makes it fail with 410 Gone and the informers re-list (the compact
	// fault). With the cache, a compaction stays invisible to clients until kube-apiserver
	// restarts.
	env, err = testenv.StartWith(testenv.Options{APIServerArgs: map[string]string{"watch-cache": "false"}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer env.Stop()
	return m.Run()
}
