package clustercache

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/kubeconfig"
)

// ErrClusterNotConnected is returned (wrapped) when a target cluster cannot be reached or
// its credentials cannot be read: a missing Secret or key, an unparsable kubeconfig, an
// API server that does not answer, or a cache that was stopped. errors.Is(err,
// ErrClusterNotConnected) tells it from an error about a single object.
var ErrClusterNotConnected = errors.New("cluster not connected")

// ClusterCache hands out a reader per target Cluster and keeps the one index of which
// Release reads which target object. The health loop declares what each pass reads with
// Track; a change of one of those objects (seen by a watch) calls the Watch callback
// with each Release that reads it.
type ClusterCache interface {
	// GetReader returns the reader of cluster's objects, or an error wrapping
	// ErrClusterNotConnected. The reader is shared: it stays valid until the Cluster's
	// kubeconfig Secret changes or the Cluster is forgotten.
	GetReader(ctx context.Context, cluster *v1alpha1.Cluster) (ObjectReader, error)
	// Track replaces what release (a namespace/name key) reads with refs, all on
	// cluster; a nil cluster or no refs drops the release. A watching cache starts
	// informers for the types and namespaces that Releases name and stops those that
	// nothing names any more.
	Track(release string, cluster *v1alpha1.Cluster, refs []TargetRef)
	// Untrack drops everything release reads.
	Untrack(release string)
	// Watch registers the callbacks of the cache (nil ignores the event): release is
	// called for each Release that reads an object that changed, once per change; cluster
	// is called with a Cluster's namespace and name after its clients were rebuilt (its
	// kubeconfig Secret changed). Callbacks must not block.
	Watch(release func(release string), cluster func(namespace, name string))
	// Forget drops the clients, informers and Secret watch of the Cluster
	// namespace/name (it was deleted).
	Forget(namespace, name string)
}

// ObjectReader reads live objects from one target cluster. It is the one seam through
// which the loops read targets: a watch-fed cache (Options.Watch) or GETs.
type ObjectReader interface {
	// Get returns the object, a NotFound API error when it does not exist, an error
	// wrapping ErrClusterNotConnected when the cluster does not answer, or another error.
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
}

// CachedReader is implemented by the readers that Cache hands out when they watch:
// GetCached returns the object only when memory holds it (a synced informer whose watch
// has not failed, on a cluster that is not held down), with no request and no wait, and
// false otherwise, when Get decides how to read it (a GET, a wait for the first list, or
// an error). A loop reads such entries on its own goroutine and keeps its concurrency for
// the reads that wait on the cluster.
type CachedReader interface {
	GetCached(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, bool)
}

// ObjectLister is implemented by the readers that Cache hands out (and may be by
// others): List reads the objects of gvr in namespace whose labels match selector, with
// one LIST of at most MaxListItems objects (the first page; the rest is not read), never
// from an informer. The loop lists only the Pods and ReplicaSets of a failing workload
// for its diagnosis; a watching cache never watches them. Errors are as for Get.
type ObjectLister interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error)
}

// MaxListItems bounds the objects of one ObjectLister.List: 100, the Pods of a large
// workload's revision.
const MaxListItems = 100

// TargetRef names one object that a Release reads from its target cluster: an inventory
// entry or the workload of a polled hook.
type TargetRef struct {
	GVR             schema.GroupVersionResource
	Kind            string
	Namespace, Name string
}

// ObjectKey is one object of one target cluster as the index keys it (watch events
// carry the group and kind, not the version).
type ObjectKey struct {
	// Cluster is the Cluster's namespace/name key.
	Cluster         string
	Group, Kind     string
	Namespace, Name string
}

// Options configures a Cache. Zero values take the defaults named on each field.
type Options struct {
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
	// worker for long. Default DefaultTimeout. Watches are not bounded by it.
	Timeout time.Duration
	// HoldDown is how long reads of a cluster fail fast after it did not answer, so
	// that the many Releases of one dead cluster do not each wait out Timeout and tie up
	// the workers that other clusters' Releases need. Default 15s; a changed kubeconfig
	// Secret starts over at once.
	HoldDown time.Duration
	// Clock is the time source of the hold-down, of fallbacks to GETs, and of the
	// waits for an informer's first list; nil means the real clock.
	Clock clock.Clock

	// Kubeconfig says which credentials a kubeconfig Secret may use (exec plugins and
	// local files are refused by default).
	Kubeconfig kubeconfig.Options

	// DefaultServiceAccount is the ServiceAccount, in the Cluster's namespace, whose
	// identity reads the objects of a Cluster without kubeconfigSecretRef or
	// serviceAccountName (docs/design.md, "Read identity"). Default
	// DefaultServiceAccount.
	DefaultServiceAccount string
	// UnsafeReadAsObserver reads a Cluster without kubeconfigSecretRef and without
	// serviceAccountName with Local's own identity instead of impersonating
	// DefaultServiceAccount: any tenant that can write a Release then reads, through
	// the observer, whatever the observer may read. Only for a cluster with one tenant.
	UnsafeReadAsObserver bool

	// Watch makes readers answer from informers that Track starts per resource type
	// (and namespace); without it every read is a GET.
	Watch bool
	// NamespaceThreshold: a type recorded in more namespaces than this on one cluster
	// is watched in all namespaces with one informer instead of one per namespace.
	// Default DefaultNamespaceThreshold.
	NamespaceThreshold int
	// SyncWait is how long a new informer's first list may deliver nothing before a
	// read that waits for it asks whether the server answers /version (and how long an
	// answer vouches for the server); a read waits for a list silent for 3 SyncWaits, or
	// for 12 SyncWaits in all, before it falls back to a GET. Default 5s.
	SyncWait time.Duration
	// FallbackRetry is how long a type whose list or watch is forbidden (or unserved)
	// is read with GETs before watching it is tried again. Default 5m.
	FallbackRetry time.Duration
	// Log receives the cache's log lines (started/stopped watches, fallbacks).
	Log logr.Logger
}

// Defaults of Options, also the defaults of the observer's flags.
const (
	DefaultTimeout            = 10 * time.Second
	DefaultNamespaceThreshold = 16
	// DefaultServiceAccount is the default of Options.DefaultServiceAccount and of the
	// observer's --default-service-account.
	DefaultServiceAccount = "convoy-health-reader"
)

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.HoldDown <= 0 {
		o.HoldDown = 15 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.NamespaceThreshold <= 0 {
		o.NamespaceThreshold = DefaultNamespaceThreshold
	}
	if o.SyncWait <= 0 {
		o.SyncWait = 5 * time.Second
	}
	if o.FallbackRetry <= 0 {
		o.FallbackRetry = 5 * time.Minute
	}
	if o.DefaultServiceAccount == "" {
		o.DefaultServiceAccount = DefaultServiceAccount
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	return o
}
