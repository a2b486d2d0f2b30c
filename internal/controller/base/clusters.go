package base

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// ErrClusterNotConnected is returned (wrapped) when a target cluster cannot be reached or
// its credentials cannot be read: a missing Secret or key, an unparsable kubeconfig, or
// an API server that does not answer. errors.Is(err, ErrClusterNotConnected) tells it
// from an error about a single object.
var ErrClusterNotConnected = errors.New("cluster not connected")

// ObjectReader reads live objects from one target cluster. It is the one seam through
// which the loops read targets, so a watch-fed cache can replace direct GETs later.
type ObjectReader interface {
	// Get returns the object, a NotFound API error when it does not exist, an error
	// wrapping ErrClusterNotConnected when the cluster does not answer, or another error.
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
}

// ClusterClients hands out an ObjectReader per target Cluster.
type ClusterClients interface {
	// ForCluster returns the reader of cluster, or an error wrapping
	// ErrClusterNotConnected.
	ForCluster(ctx context.Context, cluster *v1alpha1.Cluster) (ObjectReader, error)
	// Forget releases the clients of the Cluster namespace/name.
	Forget(namespace, name string)
}

// ClusterCacheOptions configures a ClusterCache.
type ClusterCacheOptions struct {
	// Local is the config of the cluster the observer runs in, used for a Cluster
	// without kubeconfigSecretRef.
	Local *rest.Config
	// SecretReader reads kubeconfig Secrets; an uncached reader keeps the observer from
	// caching every Secret of the management cluster.
	SecretReader client.Reader
	// QPS and Burst of each target client (client-go defaults, 5 and 10, throttle a
	// Release of many objects).
	QPS   float32
	Burst int
	// Timeout bounds each request to a target, so one dead cluster never stalls a
	// worker for long. Default 10s.
	Timeout time.Duration
	// HoldDown is how long reads of a cluster fail fast after it did not answer, so
	// that the many Releases of one dead cluster do not each wait out Timeout and tie up
	// the workers that other clusters' Releases need. Default 15s; a changed kubeconfig
	// Secret starts over at once.
	HoldDown time.Duration
	// Clock is the time source of the hold-down; nil means the real clock.
	Clock clock.PassiveClock
}

// ClusterCache builds clients once per Cluster and rebuilds them when the Cluster's
// kubeconfig Secret changes. It holds no lock across a network call.
type ClusterCache struct {
	opts ClusterCacheOptions

	mu      sync.Mutex
	clients map[string]cachedClient
}

type cachedClient struct {
	fingerprint string
	reader      ObjectReader
}

// NewClusterCache returns an empty cache.
func NewClusterCache(opts ClusterCacheOptions) *ClusterCache {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.HoldDown <= 0 {
		opts.HoldDown = 15 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &ClusterCache{opts: opts, clients: map[string]cachedClient{}}
}

// ForCluster implements ClusterClients.
func (c *ClusterCache) ForCluster(ctx context.Context, cluster *v1alpha1.Cluster) (ObjectReader, error) {
	key := KeyOf(cluster)
	fingerprint := "local"
	var kubeconfig []byte
	if ref := cluster.Spec.KubeconfigSecretRef; ref != nil {
		secret := &corev1.Secret{}
		if err := c.opts.SecretReader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, secret); err != nil {
			return nil, fmt.Errorf("%w: reading kubeconfig Secret %s/%s of Cluster %s: %w", ErrClusterNotConnected, cluster.Namespace, ref.Name, cluster.Name, err)
		}
		data, ok := secret.Data[ref.GetKey()]
		if !ok || len(data) == 0 {
			return nil, fmt.Errorf("%w: Secret %s/%s of Cluster %s has no key %q", ErrClusterNotConnected, cluster.Namespace, ref.Name, cluster.Name, ref.GetKey())
		}
		kubeconfig = data
		fingerprint = fmt.Sprintf("%s/%s/%s", secret.UID, secret.ResourceVersion, ref.GetKey())
	}
	c.mu.Lock()
	cached, ok := c.clients[key]
	c.mu.Unlock()
	if ok && cached.fingerprint == fingerprint {
		return cached.reader, nil
	}
	cfg, err := c.restConfig(cluster, kubeconfig)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: building a client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: building a client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
	}
	reader := &dynamicReader{client: dyn, cluster: key, holdDown: c.opts.HoldDown, clock: c.opts.Clock,
		probe: func() error { _, err := disc.ServerVersion(); return err }}
	c.mu.Lock()
	c.clients[key] = cachedClient{fingerprint: fingerprint, reader: reader}
	c.mu.Unlock()
	return reader, nil
}

func (c *ClusterCache) restConfig(cluster *v1alpha1.Cluster, kubeconfig []byte) (*rest.Config, error) {
	var cfg *rest.Config
	if kubeconfig == nil {
		if c.opts.Local == nil {
			return nil, fmt.Errorf("%w: Cluster %s has no kubeconfigSecretRef and no local config is set", ErrClusterNotConnected, cluster.Name)
		}
		cfg = rest.CopyConfig(c.opts.Local)
	} else {
		var err error
		cfg, err = clientcmd.RESTConfigFromKubeConfig(kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("%w: parsing the kubeconfig of Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
		}
	}
	if c.opts.QPS > 0 {
		cfg.QPS = c.opts.QPS
	}
	if c.opts.Burst > 0 {
		cfg.Burst = c.opts.Burst
	}
	cfg.Timeout = c.opts.Timeout
	cfg.UserAgent = "convoy-observer"
	return cfg, nil
}

// Forget implements ClusterClients.
func (c *ClusterCache) Forget(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.clients, namespace+"/"+name)
}

type dynamicReader struct {
	client   dynamic.Interface
	cluster  string
	holdDown time.Duration
	clock    clock.PassiveClock
	// probe asks the server for /version: it tells a dead cluster from one slow object.
	probe func() error

	mu        sync.Mutex
	downUntil time.Time
	downErr   error
}

func (r *dynamicReader) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	r.mu.Lock()
	until, last := r.downUntil, r.downErr
	r.mu.Unlock()
	if now := r.clock.Now(); now.Before(until) {
		return nil, fmt.Errorf("%w: Cluster %s did not answer (not retried before %s): %w",
			ErrClusterNotConnected, r.cluster, until.UTC().Format(time.RFC3339), last)
	}
	var ri dynamic.ResourceInterface = r.client.Resource(gvr)
	if namespace != "" {
		ri = r.client.Resource(gvr).Namespace(namespace)
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err == nil || !IsConnectionError(err) {
		return u, err
	}
	if ctx.Err() != nil { // our caller gave up (shutdown, a sibling's failure): no verdict
		return nil, fmt.Errorf("%w: Cluster %s: %w", ErrClusterNotConnected, r.cluster, err)
	}
	// A request that was connected and then timed out may be one slow object (a hung
	// conversion webhook or aggregated API): ask the server itself before holding the
	// whole cluster down. A failed dial needs no second opinion.
	if !isDialError(err) && r.probe != nil && r.probe() == nil {
		return nil, fmt.Errorf("the server answers, but not for this object: %w", err)
	}
	r.mu.Lock()
	r.downUntil, r.downErr = r.clock.Now().Add(r.holdDown), err
	r.mu.Unlock()
	return nil, fmt.Errorf("%w: Cluster %s: %w", ErrClusterNotConnected, r.cluster, err)
}

// isDialError reports whether err failed to open a connection at all (refused,
// unreachable, or a dial timeout).
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// IsConnectionError reports whether err says that the server did not answer at all
// (a transport error, a timeout of the request) as opposed to an API status: any
// status, even 503 from one unavailable aggregated API, concerns one object and leaves
// the rest of the cluster readable.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrClusterNotConnected) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var uerr *url.Error
	var nerr net.Error
	return errors.As(err, &uerr) || errors.As(err, &nerr) || errors.Is(err, context.DeadlineExceeded)
}
