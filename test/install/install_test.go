// Package install tests the install as shipped: config/default, as the Helm chart
// charts/convoy-observer renders it (hack/chart proves the chart renders config/default's
// objects; the install runs through the chart), applied to a real kube-apiserver,
// convoy-api and convoy-observer run with the tokens of its ServiceAccounts and its
// arguments behind its APIService, the demo scenario through them (hack/demo --install
// --from-chart), and then what they did and what they expose:
//
//   - every request of the two ServiceAccounts, from the kube-apiserver's audit log: none
//     refused, and every permission of the shipped roles either used or listed in
//     notExercised with the reason it stays (least privilege, measured);
//   - config/monitoring: the rules pass Prometheus' own rule parser (hack/promrules), and
//     every metric and label that an alert or a dashboard query names is exposed by the
//     observer or convoy-api (their /metrics at the end of the scenario, or, for a series
//     that only an event outside the scenario creates, the metric's declaration in
//     internal/).
package install

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kumodo/convoy-observer/internal/localcluster"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// namespace is config/default's.
const namespace = "convoy-system"

// run is one run of the demo on the install, shared by the tests.
type run struct {
	root, out, auditLog, metricsDir string
	err                             error
}

var shared *run

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		_ = os.RemoveAll(filepath.Dir(shared.auditLog))
	}
	os.Exit(code)
}

// demo runs `demo --once --install` once for every test of the package.
func demo(t *testing.T) *run {
	t.Helper()
	if shared != nil {
		if shared.err != nil {
			t.Fatalf("the demo on the install failed: %v\n%s", shared.err, shared.out)
		}
		return shared
	}
	shared = &run{}
	r := shared
	fail := func(format string, args ...any) {
		r.err = fmt.Errorf(format, args...)
		t.Fatalf("%v\n%s", r.err, r.out)
	}
	var err error
	if r.root, err = testenv.RepoRoot(); err != nil {
		fail("%v", err)
	}
	assets, err := localcluster.FindAssets(r.root)
	if err != nil {
		fail("%v", err)
	}
	dir, err := os.MkdirTemp("", "convoy-install-")
	if err != nil {
		fail("%v", err)
	}
	r.auditLog, r.metricsDir = filepath.Join(dir, "audit.log"), filepath.Join(dir, "metrics")
	bin := filepath.Join(dir, "demo")
	build := exec.Command("go", "build", "-o", bin, "./hack/demo")
	build.Dir = r.root
	if out, err := build.CombinedOutput(); err != nil {
		fail("go build ./hack/demo: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--once", "--install", "--from-chart", "--timeout=10m", "--audit-log="+r.auditLog, "--metrics-dir="+r.metricsDir)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+assets)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	r.out = out.String()
	if err != nil {
		fail("demo --once --install: %v", err)
	}
	return r
}

// TestScenario checks that the demo scenario reached every expected state with the
// components running as shipped.
func TestScenario(t *testing.T) {
	r := demo(t)
	for _, want := range []string{
		"convoy-api and convoy-observer run as the ServiceAccounts convoy-system/convoy-api and convoy-system/convoy-observer",
		"demo: PASS in ",
		"Healthy=True (Healthy): 5/5 healthy",
		"final state: Healthy=False (Degraded); 5 entries: 4 Healthy, 0 Progressing, 1 Degraded, 0 Unknown",
		"convoyctl release wait exited 0",
		"convoyctl release wait exited 3",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output of the demo:\n%s", r.out)
	}
}

const (
	relist = "informers' list: on this kube-apiserver the initial state streams in a watch (WatchList); an older one, and a re-list after a failed watch, need list"
)
