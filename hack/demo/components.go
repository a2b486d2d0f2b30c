package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kumodo/convoy-observer/internal/localcluster"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// componentReadyTimeout bounds how long the demo waits for convoy-api and
// convoy-observer to answer their probes.
const componentReadyTimeout = 60 * time.Second

// raceReport is how the race detector starts a report.
const raceReport = "WARNING: DATA RACE"

// buildComponents builds convoy-api, convoy-observer and convoyctl from the repository at root
// into binDir, as real binaries (the demo runs them as separate processes, like in a
// cluster); with race, with the race detector.
func buildComponents(ctx context.Context, root, binDir string, race bool) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/convoy-api", "./cmd/convoy-observer", "./cmd/convoyctl")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// components are the running convoy-api and convoy-observer.
type components struct {
	// APIURL is the base URL of convoy-api itself (https, its serving CA in agg).
	APIURL string
	// API and Observer are the two processes.
	API, Observer *localcluster.Process
	// MetricsURL is the observer's /metrics ("" when off: only --install turns it on);
	// apiClient reaches APIURL (--install).
	MetricsURL string
	apiClient  *http.Client
}

// startComponents starts convoy-api and convoy-observer from binDir against the cluster
// c, as in a real cluster: convoy-api serves HTTPS on a free port of 127.0.0.1 with the
// serving pair of agg, is registered as the APIService behind the kube-apiserver, and
// the observer wakes the controller-manager through the kube-apiserver (no --sync-url).
// Both run with the cluster's admin kubeconfig. It waits until convoy-api is ready and
// Available and the observer answers its probe; the observer's metrics endpoint is off.
// On error, what was started is stopped.
func startComponents(ctx context.Context, binDir string, c *localcluster.Cluster, agg *testenv.Aggregation, logDir string) (_ *components, err error) {
	comps := &components{}
	defer func() {
		if err != nil {
			comps.Stop()
		}
	}()
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	comps.APIURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))
	comps.API, err = localcluster.StartProcess(ctx, "convoy-api", filepath.Join(binDir, "convoy-api"),
		[]string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(apiPort),
			"--tls-cert-file=" + agg.ServingCertFile,
			"--tls-private-key-file=" + agg.ServingKeyFile,
		},
		filepath.Join(logDir, "convoy-api.log"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(agg.ServingCA)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	if err := waitHTTP(ctx, hc, comps.API, comps.APIURL+"/readyz"); err != nil {
		return nil, err
	}
	if err := agg.RegisterAPIService(ctx, c.Client, apiPort); err != nil {
		return nil, fmt.Errorf("registering convoy-api with the kube-apiserver: %w; the end of %s:\n%s", err, comps.API.LogPath, comps.API.LogTail(15))
	}

	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	probeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(probePort))
	comps.Observer, err = localcluster.StartProcess(ctx, "convoy-observer", filepath.Join(binDir, "convoy-observer"),
		[]string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--metrics-bind-address=0",
			"--health-probe-bind-address=" + probeAddr,
		},
		filepath.Join(logDir, "convoy-observer.log"))
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, &http.Client{Timeout: 2 * time.Second}, comps.Observer, "http://"+probeAddr+"/readyz"); err != nil {
		return nil, err
	}
	return comps, nil
}

// Check returns an error when convoy-api or convoy-observer stopped on its own.
func (c *components) Check() error {
	for _, p := range []*localcluster.Process{c.API, c.Observer} {
		if p == nil {
			continue
		}
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

// Races returns an error naming the components whose log holds a report of the race
// detector.
func (c *components) Races() error {
	var racy []string
	for _, p := range []*localcluster.Process{c.API, c.Observer} {
		if p == nil {
			continue
		}
		data, err := os.ReadFile(p.LogPath)
		if err != nil {
			return fmt.Errorf("reading the log of %s: %w", p.Name, err)
		}
		if bytes.Contains(data, []byte(raceReport)) {
			racy = append(racy, fmt.Sprintf("%s (see %s)", p.Name, p.LogPath))
		}
	}
	if len(racy) > 0 {
		return fmt.Errorf("the race detector reported a data race in %s", strings.Join(racy, " and "))
	}
	return nil
}

// Stop stops the observer, then convoy-api.
func (c *components) Stop() {
	if c == nil {
		return
	}
	for _, p := range []*localcluster.Process{c.Observer, c.API} {
		if p != nil {
			_ = p.Stop()
		}
	}
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP waits until url answers 200 to hc, failing early when p exits.
func waitHTTP(ctx context.Context, hc *http.Client, p *localcluster.Process, url string) error {
	deadline := time.Now().Add(componentReadyTimeout)
	var last error
	for {
		if err := p.Exited(); err != nil {
			return err
		}
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (GET %s: %v); the end of %s:\n%s",
				p.Name, componentReadyTimeout, url, last, p.LogPath, p.LogTail(15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
