// Package localcluster runs a small simulated Kubernetes cluster on 127.0.0.1 from the
// binaries of hack/controlplane.sh: etcd and kube-apiserver (through controller-runtime's
// envtest), kube-controller-manager, kube-scheduler, and kwok, which plays the kubelet of
// a few fake nodes. Workloads really roll out on it: the real controllers create
// ReplicaSets and Pods and write the workloads' status, the scheduler binds the Pods to
// the fake nodes, and kwok turns them Running (and the Pods of Jobs Succeeded).
//
// Every process is started in its own process group and stopped by Cluster.Stop, when
// the context given to Start is done, and by the kernel if this program dies
// (Pdeathsig). All state (etcd data, certificates, kubeconfig, logs) lives in the
// directory given to Start.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure Start.
type Options struct {
	// AssetsDir holds the binaries and kwok-stages.yaml (see FindAssets).
	AssetsDir string
	// Dir is the state directory; it must exist. Start writes etcd's data, the
	// certificates, the kubeconfig and the logs there and never removes it.
	Dir string
	// CRDDirs are directories of CustomResourceDefinitions to install.
	CRDDirs []string
	// Scheme is the scheme of Cluster.Client.
	Scheme *runtime.Scheme
	// APIServerArgs are extra kube-apiserver flags (name without dashes → value), for
	// example the aggregation layer's (testenv.Aggregation.APIServerArgs).
	APIServerArgs map[string]string
	// Nodes is the number of fake nodes; 0 means DefaultNodes.
	Nodes int
	// Logf, when set, receives one line for each step of the start.
	Logf func(format string, args ...any)
}

// DefaultNodes is the number of fake nodes when Options.Nodes is 0.
const DefaultNodes = 2

// ReadyTimeout bounds how long Start waits for the fake nodes to be Ready.
const ReadyTimeout = 90 * time.Second

// Cluster is a running local cluster.
type Cluster struct {
	// Dir is the state directory.
	Dir string
	// KubeconfigPath is an admin (system:masters) kubeconfig for the cluster.
	KubeconfigPath string
	// Config reaches the API server as that admin.
	Config *rest.Config
	// Client is a direct (uncached) client with Options.Scheme.
	Client client.Client
	// Nodes are the names of the fake nodes.
	Nodes []string

	env   *envtest.Environment
	procs []*Process
}

// Start starts the cluster and returns once its fake nodes are Ready. On error,
// everything it started is stopped again. The processes also stop when ctx is done.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Dir == "" || o.AssetsDir == "" || o.Scheme == nil {
		return nil, errors.New("localcluster: Options.Dir, AssetsDir and Scheme are required")
	}
	if err := CheckAssets(o.AssetsDir); err != nil {
		return nil, err
	}
	if o.Nodes <= 0 {
		o.Nodes = DefaultNodes
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c = &Cluster{Dir: o.Dir}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()

	start := time.Now()
	if err := c.startAPIServer(o); err != nil {
		return c, err
	}
	logf("etcd and kube-apiserver ready at %s (%s)", c.Config.Host, since(start))
	if err := ctx.Err(); err != nil {
		return c, err
	}

	logs := filepath.Join(o.Dir, "logs")
	kwokConfig := filepath.Join(o.AssetsDir, StagesFile)
	for _, p := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig=" + c.KubeconfigPath,
			// The token controller needs the service-account signing key and is not
			// needed: the ServiceAccount admission plugin is off (envtest's default).
			"--controllers=*,-serviceaccount-token",
			"--use-service-account-credentials=false",
			"--leader-elect=false",
			"--secure-port=0",
		}},
		{"kube-scheduler", []string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--leader-elect=false",
			"--secure-port=0",
		}},
		{"kwok", []string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--config=" + kwokConfig,
			"--manage-all-nodes=true",
		}},
	} {
		proc, err := StartProcess(ctx, p.name, filepath.Join(o.AssetsDir, p.name), p.args, filepath.Join(logs, p.name+".log"))
		if err != nil {
			return c, err
		}
		c.procs = append(c.procs, proc)
	}
	logf("kube-controller-manager, kube-scheduler and kwok started (logs in %s)", logs)

	if err := c.createNodes(ctx, o.Nodes); err != nil {
		return c, err
	}
	if err := c.waitNodesReady(ctx, ReadyTimeout); err != nil {
		return c, err
	}
	logf("%d fake nodes Ready: %v (%s in all)", len(c.Nodes), c.Nodes, since(start))
	return c, nil
}

// startAPIServer starts etcd and kube-apiserver with envtest, with their state in
// o.Dir, installs the CRDs and writes the admin kubeconfig.
func (c *Cluster) startAPIServer(o Options) error {
	env := &envtest.Environment{
		CRDDirectoryPaths:     o.CRDDirs,
		ErrorIfCRDPathMissing: len(o.CRDDirs) > 0,
		BinaryAssetsDirectory: o.AssetsDir,
		Scheme:                o.Scheme,
	}
	// envtest's defaults stay: 127.0.0.1 only, the ServiceAccount admission plugin off
	// (Pods need no token, so the token controller can stay off).
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(o.Dir, "etcd")}
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: filepath.Join(o.Dir, "apiserver")}
	args := env.ControlPlane.APIServer.Configure()
	for k, v := range o.APIServerArgs {
		args.Set(k, v)
	}
	for _, d := range []string{env.ControlPlane.Etcd.DataDir, env.ControlPlane.APIServer.CertDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	c.env = env
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver from %s: %w", o.AssetsDir, err)
	}
	user, err := env.AddUser(envtest.User{Name: "convoy-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding an admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	c.KubeconfigPath = filepath.Join(o.Dir, "kubeconfig")
	if err := os.WriteFile(c.KubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	c.Config = rest.CopyConfig(user.Config())
	c.Config.QPS, c.Config.Burst = 50, 100
	c.Client, err = client.New(c.Config, client.Options{Scheme: o.Scheme})
	return err
}

// Check returns an error when one of the cluster's processes stopped on its own.
func (c *Cluster) Check() error {
	for _, p := range c.procs {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops kwok, the scheduler and the controller manager, then kube-apiserver and
// etcd. It is safe to call on a partly started cluster and more than once. It leaves
// Dir in place.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		_ = c.procs[i].Stop()
	}
	if c.env != nil {
		_ = c.env.Stop()
		c.env = nil
	}
}

// since formats the time elapsed since t in tenths of a second.
func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
