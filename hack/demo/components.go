package main

import (
	"bytes"
	"context"
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
	// APIURL is the base URL of convoy-api (the observer's --sync-url).
	APIURL string
	// API and Observer are the two processes.
	API, Observer *localcluster.Process
}

// startComponents starts convoy-api and convoy-observer from binDir against the
// cluster of kubeconfig, on free ports of 127.0.0.1, and waits until both answer their
// probes. The observer's metrics endpoint is off. On error, what was started is stopped.
func startComponents(ctx context.Context, binDir, kubeconfig, logDir string) (_ *components, err error) {
	c := &components{}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	apiAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))
	c.APIURL = "http://" + apiAddr
	c.API, err = localcluster.StartProcess(ctx, "convoy-api", filepath.Join(binDir, "convoy-api"),
		[]string{"--kubeconfig=" + kubeconfig, "--bind-address=" + apiAddr},
		filepath.Join(logDir, "convoy-api.log"))
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, c.API, c.APIURL+"/healthz"); err != nil {
		return nil, err
	}

	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	probeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(probePort))
	c.Observer, err = localcluster.StartProcess(ctx, "convoy-observer", filepath.Join(binDir, "convoy-observer"),
		[]string{
			"--kubeconfig=" + kubeconfig,
			"--sync-url=" + c.APIURL,
			"--metrics-bind-address=0",
			"--health-probe-bind-address=" + probeAddr,
		},
		filepath.Join(logDir, "convoy-observer.log"))
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, c.Observer, "http://"+probeAddr+"/readyz"); err != nil {
		return nil, err
	}
	return c, nil
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

// waitHTTP waits until url answers 200, failing early when p exits.
func waitHTTP(ctx context.Context, p *localcluster.Process, url string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
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
