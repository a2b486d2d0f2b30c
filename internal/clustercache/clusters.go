package clustercache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
)

// Cache is the ClusterCache of the observer. It builds clients once
// per Cluster and rebuilds them when the Cluster's kubeconfig Secret changes; with
// Options.Watch each cluster's reader is a cache of the objects that Releases record,
// fed by informers (see Track). It holds no lock across a network call.
//
// Its informers and Secret watches run until Stop, or until the context of Start (the
// manager's Runnable) is cancelled; a Cache that is never started runs them until Stop.
type Cache struct {
	opts    Options
	secrets *secretWatches // nil without Options.Secrets
	// ctx is the root of every informer and Secret watch; cancel ends them (Stop).
	ctx    context.Context
	cancel context.CancelFunc
	// running tracks their goroutines, so Stop returns once they are gone.
	running *goroutines

	// fields is what the rules read (SetRuleFields); nil until set: every field is kept.
	fields atomic.Pointer[keptFields]

	mu      sync.Mutex
	stopped bool
	clients map[string]*cachedClient
	index   index
	// onRelease and onCluster are the Watch callbacks.
	onRelease func(string)
	onCluster func(namespace, name string)
}

var _ ClusterCache = (*Cache)(nil)

type cachedClient struct {
	fingerprint string
	reader      ObjectReader
	watches     *targetWatches // nil without Watch
	// own are the HTTP clients of a kubeconfig Secret's Cluster, whose transports are its
	// own (see ownTransport): stop closes their idle connections, at once and again
	// after closeIdleAfter.
	own []*http.Client
}

func (cc *cachedClient) stop() {
	if cc == nil {
		return
	}
	if cc.watches != nil {
		cc.watches.stop()
	}
	if len(cc.own) == 0 {
		return
	}
	closeIdle := func() {
		for _, hc := range cc.own {
			utilnet.CloseIdleConnectionsFor(hc.Transport)
		}
	}
	closeIdle()
	// The informers end their watches once cancelled, within moments: their
	// connections become idle only then.
	time.AfterFunc(closeIdleAfter, closeIdle)
}

// closeIdleAfter is how long after a Cluster's clients stopped their idle connections are
// closed again, once the cancelled watches have ended theirs.
const closeIdleAfter = 3 * time.Second

// New returns an empty cache with opts' zero fields defaulted.
func New(opts Options) *Cache {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{opts: opts, ctx: ctx, cancel: cancel, running: newGoroutines(),
		clients: map[string]*cachedClient{}, index: newIndex()}
	if opts.Secrets != nil {
		c.secrets = newSecretWatches(ctx, c.running, opts.Secrets, opts.SecretReader, &c.opts, c.secretChanged)
	}
	return c
}

// GetReader implements ClusterCache.
func (c *Cache) GetReader(ctx context.Context, cluster *v1alpha1.Cluster) (ObjectReader, error) {
	key := toolscache.MetaObjectToName(cluster).String()
	if err := c.stoppedErr(key); err != nil {
		return nil, err
	}
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
	// A changed read identity (the Cluster's serviceAccountName) rebuilds the clients.
	fingerprint += "|as=" + c.ReadIdentity(cluster)
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
	if c.stopped {
		built.stop()
		return nil, c.stoppedErrLocked(key)
	}
	if cur, ok := c.clients[key]; ok && cur.fingerprint == fingerprint {
		built.stop() // another pass built it meanwhile
		return cur.reader, nil
	}
	c.clients[key].stop()
	c.clients[key] = built
	if built.watches != nil {
		built.watches.sync(c.index.scopes[key])
	}
	return built.reader, nil
}

// build makes the clients of cluster: a GET reader with the hold-down and, with Watch,
// the informer cache in front of it.
func (c *Cache) build(cluster *v1alpha1.Cluster, kubeconfig []byte) (*cachedClient, error) {
	key := toolscache.MetaObjectToName(cluster).String()
	cfg, err := c.restConfig(cluster, kubeconfig)
	if err != nil {
		return nil, err
	}
	gcfg := rest.CopyConfig(cfg)
	gcfg.Wrap(limitAnswers(MaxAnswerBytes))
	hc, err := noRedirectClient(gcfg)
	if err != nil {
		return nil, fmt.Errorf("%w: building a client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
	}
	dyn, err := dynamic.NewForConfigAndClient(gcfg, hc)
	if err != nil {
		return nil, fmt.Errorf("%w: building a client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(gcfg, hc)
	if err != nil {
		return nil, fmt.Errorf("%w: building a client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
	}
	var own []*http.Client
	if kubeconfig != nil {
		own = append(own, hc)
	}
	probe := disc
	if cfg.Impersonate.UserName != "" && kubeconfig == nil {
		// Whether the server answers at all is no read of the tenant's: the probe of the
		// observer's own cluster goes as the observer itself. In the read identity's flow
		// it would queue behind that identity's own lists in the server's priority and
		// fairness, and a busy server would look dead. (It shares the process's cached
		// transport, so its connections are the reads'. A kubeconfig's clients have
		// transports of their own: there the probe stays on the reads' client, so that
		// a dead connection of theirs is not vouched for by a fresh one.)
		pcfg := rest.CopyConfig(gcfg)
		pcfg.Impersonate = rest.ImpersonationConfig{}
		phc, err := noRedirectClient(pcfg)
		if err != nil {
			return nil, fmt.Errorf("%w: building a client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
		}
		if probe, err = discovery.NewDiscoveryClientForConfigAndClient(pcfg, phc); err != nil {
			return nil, fmt.Errorf("%w: building a client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
		}
	}
	direct := &dynamicReader{client: dyn, cluster: key, identity: cfg.Impersonate.UserName, holdDown: c.opts.HoldDown, clock: c.opts.Clock,
		probe: func() error { _, err := probe.ServerVersion(); return err }, answerFresh: c.opts.SyncWait}
	if !c.opts.Watch {
		return &cachedClient{reader: direct, own: own}, nil
	}
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0 // a watch is a long request; the server ends it (timeoutSeconds)
	wcfg.Wrap(limitAnswers(MaxWatchBytes))
	whc, err := noRedirectClient(wcfg)
	if err != nil {
		return nil, fmt.Errorf("%w: building a watch client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
	}
	wdyn, err := dynamic.NewForConfigAndClient(wcfg, whc)
	if err != nil {
		return nil, fmt.Errorf("%w: building a watch client for Cluster %s: %w", ErrClusterNotConnected, cluster.Name, err)
	}
	if kubeconfig != nil {
		own = append(own, whc)
	}
	tw := newTargetWatches(c.ctx, c.running, key, wdyn, direct, &c.opts, c.objectChanged)
	tw.fieldsFor = c.fieldsFor
	tw.typed = newTypedClients(wcfg, whc, disc.ServerVersion)
	return &cachedClient{reader: tw, watches: tw, own: own}, nil
}

// SetRuleFields sets what the rules read (health.FieldsOf of every rule set): from now
// on the informers keep of each object only what the rules that match its type read,
// and what the loop always reads (health.RuleFields.For); docs/design.md, "What the
// cache keeps". An informer whose objects lack a field that the new rules read starts
// again (one new list of its type and namespace), and so does one started before the
// first call (it keeps whole objects); one whose rules read less keeps its objects
// until they change. nil keeps every field.
func (c *Cache) SetRuleFields(rf *health.RuleFields) {
	c.fields.Store(&keptFields{rf: rf})
	c.mu.Lock()
	var watches []*targetWatches
	for _, cc := range c.clients {
		if cc.watches != nil {
			watches = append(watches, cc.watches)
		}
	}
	c.mu.Unlock()
	for _, tw := range watches {
		tw.refield()
	}
}

// RuleFields returns what SetRuleFields last set; ok is false before the first call.
func (c *Cache) RuleFields() (rf *health.RuleFields, ok bool) {
	if k := c.fields.Load(); k != nil {
		return k.rf, true
	}
	return nil, false
}

// keptFields is one SetRuleFields.
type keptFields struct{ rf *health.RuleFields }

// fieldsFor returns the fields that informers of gvr keep (nil: every field), and
// whether SetRuleFields was called.
func (c *Cache) fieldsFor(gvr schema.GroupVersionResource) (*health.Fields, bool) {
	rf, ok := c.RuleFields()
	return rf.For(gvr.GroupVersion().String(), gvr.Resource), ok
}

// secretChanged rebuilds the clients of the Clusters (keys) whose kubeconfig Secret
// changed, appeared or went away, and wakes their Releases.
func (c *Cache) secretChanged(clusters []string) {
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
func (c *Cache) readSecret(ctx context.Context, cluster, namespace, name string) (*corev1.Secret, error) {
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
func (c *Cache) Scopes(cluster string) []string {
	c.mu.Lock()
	cc := c.clients[cluster]
	c.mu.Unlock()
	if cc == nil || cc.watches == nil {
		return nil
	}
	return cc.watches.scopes()
}

func (c *Cache) restConfig(cluster *v1alpha1.Cluster, data []byte) (*rest.Config, error) {
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
		ownTransport(cfg)
	}
	if c.opts.QPS > 0 {
		cfg.QPS = c.opts.QPS
	}
	if c.opts.Burst > 0 {
		cfg.Burst = c.opts.Burst
	}
	cfg.Timeout = c.opts.Timeout
	cfg.UserAgent = "convoy-observer"
	if identity := c.ReadIdentity(cluster); identity != "" {
		// Only the user name: the API server adds the ServiceAccount's groups
		// (system:serviceaccounts, system:serviceaccounts:NAMESPACE) itself.
		cfg.Impersonate = rest.ImpersonationConfig{UserName: identity}
	}
	return cfg, nil
}

// ownTransport gives the clients of a kubeconfig Secret's config transports of their
// own. client-go keeps every transport it builds in a process-wide cache keyed by the
// TLS settings (certificates and keys included) and never evicts one: each new or
// rotated credential of a tenant's kubeconfig would leave its transport (its TLS state,
// and its connection pool) behind for the life of the process. A config with a dialer of its
// own is not cached; the dialer is the one client-go uses by default (30 s connect
// timeout and keep-alive). The clients are dropped with the Cluster's cachedClient,
// which closes their idle connections. The process's own config (Options.Local) keeps
// the shared transport: it is one entry whatever the number of Clusters.
func ownTransport(cfg *rest.Config) {
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
}

// Forget implements ClusterCache: it stops the cluster's informers and the watch of
// its kubeconfig Secret, and drops the cluster's metric series. What Releases track on
// it stays in the index (a Cluster that comes back is watched again).
func (c *Cache) Forget(namespace, name string) {
	key := namespace + "/" + name
	c.mu.Lock()
	c.clients[key].stop()
	delete(c.clients, key)
	c.mu.Unlock()
	forgetClusterMetrics(key)
	if c.secrets != nil {
		c.secrets.unlink(key)
	}
}

// noRedirectClient is the HTTP client of cfg (rest.HTTPClientFor: its TLS, credentials
// and impersonation) that follows no redirect. A target's answer is a Kubernetes API
// server's or an error: a redirect would send the read, with the kubeconfig's
// credentials and the read identity's Impersonate-User header, to a host that the
// kubeconfig checks never saw (plain http, off --target-server-allowlist, the node's
// metadata service), and hand its answer to the rules as the object. A 3xx is returned
// as it is, so the read fails with its code.
func noRedirectClient(cfg *rest.Config) (*http.Client, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return hc, nil
}

// MaxAnswerBytes bounds the body of one answer of a target to a GET (of one object, or
// the version probe), in bytes: 16 MiB. An object stored by a Kubernetes API server is at
// most about 1.5 MiB (etcd's request limit), a few times that as JSON; a server that
// answers more is not one, and reading it whole would let one tenant's server exhaust
// the observer's memory (16 reads at once per pass, the passes of every Release of the
// tenant at once). A larger answer fails the read with ErrAnswerTooLarge.
const MaxAnswerBytes = 16 << 20

// MaxWatchBytes bounds what one list or watch connection of an informer may carry, in
// bytes: 256 MiB. A watch lasts minutes (the server ends it) and a first list of a
// namespace's objects of one type is far smaller; past it the connection fails and the
// informer lists again.
const MaxWatchBytes = 256 << 20

// ErrAnswerTooLarge is (errors.Is) the error of a read whose answer is larger than
// MaxAnswerBytes, or of an informer's connection that carried more than MaxWatchBytes;
// its text names the bound.
var ErrAnswerTooLarge = errors.New("the answer is too large")

// tooLargeError is ErrAnswerTooLarge with the bound that was passed.
type tooLargeError struct{ limit int64 }

func (e tooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than %d MiB", e.limit>>20)
}
func (e tooLargeError) Is(target error) bool { return target == ErrAnswerTooLarge }

// limitAnswers wraps a transport so that every answer's body fails with
// ErrAnswerTooLarge once more than limit bytes were read.
func limitAnswers(limit int64) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return &answerLimit{rt: rt, limit: limit} }
}

// answerLimit is the round tripper of limitAnswers. It says what it wraps
// (utilnet.RoundTripperWrapper), so that closing a client's idle connections reaches
// its transport.
type answerLimit struct {
	rt    http.RoundTripper
	limit int64
}

func (a *answerLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.rt.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: a.limit, limit: a.limit}
	}
	return resp, err
}

func (a *answerLimit) WrappedRoundTripper() http.RoundTripper { return a.rt }

// limitedBody is a body of which at most left more bytes (of limit) may be read.
type limitedBody struct {
	io.ReadCloser
	left, limit int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, tooLargeError{limit: b.limit}
	}
	return n, err
}
