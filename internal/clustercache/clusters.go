package clustercache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
)

// ErrClusterNotConnected is returned (wrapped) when a target cluster cannot be reached or
// its credentials cannot be read: a missing Secret or key, an unparsable kubeconfig, or
// an API server that does not answer. errors.Is(err, ErrClusterNotConnected) tells it
// from an error about a single object.
var ErrClusterNotConnected = errors.New("cluster not connected")

// ObjectReader reads live objects from one target cluster. It is the one seam through
// which the loops read targets: a watch-fed cache (ClusterCacheOptions.Watch) or GETs.
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
	// SecretReader reads kubeconfig Secrets when Secrets is nil, or when watching them
	// is forbidden; an uncached reader keeps the observer from caching every Secret of
	// the management cluster.
	SecretReader client.Reader
	// Secrets, when set, watches each kubeconfig Secret that a Cluster references (one
	// watch per Secret, by name), so a pass reads it from memory and a rotation rebuilds
	// the cluster's clients and cache at once.
	Secrets kubernetes.Interface
	// QPS and Burst of each target client (client-go defaults, 5 and 10, throttle a
	// Release of many objects). With Watch they pace GETs and the lists of informers.
	QPS   float32
	Burst int
	// Timeout bounds each request to a target, so one dead cluster never stalls a
	// worker for long. Default 10s. Watches are not bounded by it.
	Timeout time.Duration
	// HoldDown is how long reads of a cluster fail fast after it did not answer, so
	// that the many Releases of one dead cluster do not each wait out Timeout and tie up
	// the workers that other clusters' Releases need. Default 15s; a changed kubeconfig
	// Secret starts over at once.
	HoldDown time.Duration
	// Clock is the time source of the hold-down; nil means the real clock.
	Clock clock.PassiveClock

	// Kubeconfig says which credentials a kubeconfig Secret may use (exec plugins and
	// local files are refused by default).
	Kubeconfig kubeconfig.Options

	// Watch makes readers answer from informers that Track starts per resource type
	// (and namespace); without it every read is a GET.
	Watch bool
	// NamespaceThreshold: a type recorded in more namespaces than this on one cluster
	// is watched in all namespaces with one informer instead of one per namespace.
	// Default 16.
	NamespaceThreshold int
	// SyncWait bounds how long a read waits for a new informer's first list before it
	// falls back to a GET. Default 5s.
	SyncWait time.Duration
	// FallbackRetry is how long a type whose list or watch is forbidden (or unserved)
	// is read with GETs before watching it is tried again. Default 5m.
	FallbackRetry time.Duration
	// Log receives the cache's log lines (started/stopped watches, fallbacks).
	Log logr.Logger
}

// ClusterCache builds clients once per Cluster and rebuilds them when the Cluster's
// kubeconfig Secret changes. With Watch, each cluster's reader is a cache of the
// objects that Releases record, fed by informers (see Track). It holds no lock across a
// network call.
type ClusterCache struct {
	opts    ClusterCacheOptions
	secrets *secretWatches

	mu      sync.Mutex
	clients map[string]*cachedClient
	// interest: cluster key → release key → what the release reads (Track).
	interest map[string]map[string][]TargetRef
	// releaseCluster: release key → the cluster key it reads.
	releaseCluster map[string]string
	onObject       func(ObjectEvent)
	onCluster      func(namespace, name string)
}

type cachedClient struct {
	fingerprint string
	reader      ObjectReader
	watches     *targetWatches // nil without Watch
}

func (cc *cachedClient) stop() {
	if cc != nil && cc.watches != nil {
		cc.watches.stop()
	}
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
	if opts.NamespaceThreshold <= 0 {
		opts.NamespaceThreshold = 16
	}
	if opts.SyncWait <= 0 {
		opts.SyncWait = 5 * time.Second
	}
	if opts.FallbackRetry <= 0 {
		opts.FallbackRetry = 5 * time.Minute
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	c := &ClusterCache{opts: opts, clients: map[string]*cachedClient{},
		interest: map[string]map[string][]TargetRef{}, releaseCluster: map[string]string{}}
	if opts.Secrets != nil {
		c.secrets = newSecretWatches(opts.Secrets, opts.SecretReader, &c.opts, c.secretChanged)
	}
	return c
}

// ForCluster implements ClusterClients.
func (c *ClusterCache) ForCluster(ctx context.Context, cluster *v1alpha1.Cluster) (ObjectReader, error) {
	key := toolscache.MetaObjectToName(cluster).String()
	fingerprint := "local"
	var kubeconfig []byte
	if ref := cluster.Spec.KubeconfigSecretRef; ref != nil {
		secret, err := c.readSecret(ctx, key, cluster.Namespace, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: reading kubeconfig Secret %s/%s of Cluster %s: %w", ErrClusterNotConnected, cluster.Namespace, ref.Name, cluster.Name, err)
		}
		data, ok := secret.Data[ref.GetKey()]
		if !ok || len(data) == 0 {
			return nil, fmt.Errorf("%w: Secret %s/%s of Cluster %s has no key %q", ErrClusterNotConnected, cluster.Namespace, ref.Name, cluster.Name, ref.GetKey())
		}
		kubeconfig = data
		fingerprint = fmt.Sprintf("%s/%s/%s", secret.UID, secret.ResourceVersion, ref.GetKey())
	} else if c.secrets != nil {
		c.secrets.unlink(key)
	}
	c.mu.Lock()
	cached, ok := c.clients[key]
	c.mu.Unlock()
	if ok && cached.fingerprint == fingerprint {
		return cached.reader, nil
	}
	built, err := c.build(cluster, kubeconfig)
	if err != nil {
		return nil, err
	}
	built.fingerprint = fingerprint
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.clients[key]; ok && cur.fingerprint == fingerprint {
		built.stop() // another pass built it meanwhile
		return cur.reader, nil
	}
	c.clients[key].stop()
	c.clients[key] = built
	if built.watches != nil {
		for release, refs := range c.interest[key] {
			built.watches.set(release, refs)
		}
	}
	return built.reader, nil
}

// build makes the clients of cluster: a GET reader with the hold-down and, with Watch,
// the informer cache in front of it.
func (c *ClusterCache) build(cluster *v1alpha1.Cluster, kubeconfig []byte) (*cachedClient, error) {
	key := toolscache.MetaObjectToName(cluster).String()
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
	direct := &dynamicReader{client: dyn, cluster: key, holdDown: c.opts.HoldDown, clock: c.opts.Clock,
		probe: func() error { _, err := disc.ServerVersion(); return err }}
	if !c.opts.Watch {
		return &cachedClient{reader: direct}, nil
	}
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0 // a watch is a long request; the server ends it (timeoutSeconds)
	wdyn, err := dynamic.NewForConfig(wcfg)
	if err != nil {
		return nil, fmt.Errorf("%w: building a watch client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
	}
	tw := newTargetWatches(key, wdyn, direct, &c.opts, c.objectChanged)
	return &cachedClient{reader: tw, watches: tw}, nil
}

// Track implements TargetTracker: release reads refs from cluster from now on (nil
// cluster: from no cluster). Informers start for the types and namespaces that
// Releases name and stop when none does any more.
func (c *ClusterCache) Track(release string, cluster *v1alpha1.Cluster, refs []TargetRef) {
	if cluster == nil {
		c.Untrack(release)
		return
	}
	key := toolscache.MetaObjectToName(cluster).String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.releaseCluster[release]; ok && old != key {
		c.dropLocked(release, old)
	}
	if len(refs) == 0 {
		c.dropLocked(release, key)
		return
	}
	c.releaseCluster[release] = key
	m := c.interest[key]
	if m == nil {
		m = map[string][]TargetRef{}
		c.interest[key] = m
	}
	m[release] = refs
	if cc := c.clients[key]; cc != nil && cc.watches != nil {
		cc.watches.set(release, refs)
	}
}

// Untrack implements TargetTracker.
func (c *ClusterCache) Untrack(release string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if key, ok := c.releaseCluster[release]; ok {
		c.dropLocked(release, key)
	}
}

func (c *ClusterCache) dropLocked(release, key string) {
	delete(c.releaseCluster, release)
	if m := c.interest[key]; m != nil {
		delete(m, release)
		if len(m) == 0 {
			delete(c.interest, key)
		}
	}
	if cc := c.clients[key]; cc != nil && cc.watches != nil {
		cc.watches.set(release, nil)
	}
}

// Notify implements TargetTracker.
func (c *ClusterCache) Notify(objects func(ObjectEvent), clusters func(namespace, name string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onObject, c.onCluster = objects, clusters
}

func (c *ClusterCache) objectChanged(ev ObjectEvent) {
	c.mu.Lock()
	fn := c.onObject
	c.mu.Unlock()
	if fn != nil {
		fn(ev)
	}
}

// secretChanged rebuilds the clients of the Clusters (keys) whose kubeconfig Secret
// changed, appeared or went away, and wakes their Releases.
func (c *ClusterCache) secretChanged(clusters []string) {
	c.mu.Lock()
	fn := c.onCluster
	for _, key := range clusters {
		c.clients[key].stop()
		delete(c.clients, key)
	}
	c.mu.Unlock()
	for _, key := range clusters {
		c.opts.Log.Info("kubeconfig Secret changed: rebuilding the cluster's clients and cache", "cluster", key)
		if fn != nil {
			ns, name, _ := strings.Cut(key, "/")
			fn(ns, name)
		}
	}
}

// readSecret reads the kubeconfig Secret of the Cluster key: from its watch when
// Secrets is set, else with a GET.
func (c *ClusterCache) readSecret(ctx context.Context, cluster, namespace, name string) (*corev1.Secret, error) {
	if c.secrets != nil {
		return c.secrets.get(ctx, cluster, namespace, name)
	}
	secret := &corev1.Secret{}
	if err := c.opts.SecretReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, err
	}
	return secret, nil
}

// Scopes returns the running informers of the Cluster key, as "resource.group in
// namespace" or "resource.group (all namespaces)", sorted: for tests and debugging.
func (c *ClusterCache) Scopes(cluster string) []string {
	c.mu.Lock()
	cc := c.clients[cluster]
	c.mu.Unlock()
	if cc == nil || cc.watches == nil {
		return nil
	}
	return cc.watches.scopes()
}

func (c *ClusterCache) restConfig(cluster *v1alpha1.Cluster, data []byte) (*rest.Config, error) {
	var cfg *rest.Config
	if data == nil {
		if c.opts.Local == nil {
			return nil, fmt.Errorf("%w: Cluster %s has no kubeconfigSecretRef and no local config is set", ErrClusterNotConnected, cluster.Name)
		}
		cfg = rest.CopyConfig(c.opts.Local)
	} else {
		var err error
		cfg, err = kubeconfig.RESTConfig(data, c.opts.Kubeconfig)
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

// Forget implements ClusterClients: it stops the cluster's informers and the watch of
// its kubeconfig Secret.
func (c *ClusterCache) Forget(namespace, name string) {
	key := namespace + "/" + name
	c.mu.Lock()
	c.clients[key].stop()
	delete(c.clients, key)
	c.mu.Unlock()
	if c.secrets != nil {
		c.secrets.unlink(key)
	}
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

// heldDown returns the error of a cluster held down after it did not answer, or nil.
func (r *dynamicReader) heldDown() error {
	r.mu.Lock()
	until, last := r.downUntil, r.downErr
	r.mu.Unlock()
	if now := r.clock.Now(); now.Before(until) {
		return fmt.Errorf("%w: Cluster %s did not answer (not retried before %s): %w",
			ErrClusterNotConnected, r.cluster, until.UTC().Format(time.RFC3339), last)
	}
	return nil
}

func (r *dynamicReader) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if err := r.heldDown(); err != nil {
		return nil, err
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
