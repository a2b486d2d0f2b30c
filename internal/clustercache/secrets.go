package clustercache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretWatches watches the kubeconfig Secrets that Clusters reference, each by name
// (a field selector), so the observer neither GETs a Secret on every pass nor caches
// every Secret of the management cluster. A change of a watched Secret (after its first
// list) calls changed with the keys of the Clusters that reference it.
type secretWatches struct {
	client   kubernetes.Interface
	fallback client.Reader // when watching Secrets is forbidden
	syncWait time.Duration
	// retry is how long a Secret whose list or watch was refused is read with GETs
	// before watching it is tried again.
	retry   time.Duration
	clock   clock.Clock
	log     logr.Logger
	changed func(clusters []string)
	// ctx is the root of the watches; running runs them (the Cache's).
	ctx     context.Context
	running *goroutines

	mu      sync.Mutex
	watches map[client.ObjectKey]*secretWatch
	// refused: Secrets read with GETs until the time, because their list or watch was
	// refused (RBAC without list and watch on Secrets).
	refused map[client.ObjectKey]time.Time
	// links: cluster key → the Secret it references.
	links map[string]client.ObjectKey
}

type secretWatch struct {
	informer toolscache.SharedIndexInformer
	cancel   context.CancelFunc

	mu      sync.Mutex
	lastErr error
}

func (s *secretWatch) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// newSecretWatches returns the watches of kubeconfig Secrets with the options' SyncWait,
// FallbackRetry, Clock and Log, run by running under ctx.
func newSecretWatches(ctx context.Context, running *goroutines, c kubernetes.Interface, fallback client.Reader, opts *Options, changed func([]string)) *secretWatches {
	return &secretWatches{client: c, fallback: fallback, syncWait: opts.SyncWait, retry: opts.FallbackRetry,
		clock: opts.Clock, log: opts.Log, changed: changed, ctx: ctx, running: running,
		watches: map[client.ObjectKey]*secretWatch{}, refused: map[client.ObjectKey]time.Time{},
		links: map[string]client.ObjectKey{}}
}

// get returns the Secret namespace/name that the Cluster key references, from its
// watch (started on first use). A watch that is refused (RBAC without list/watch on
// Secrets) is stopped, logged and counted, and the Secret read with GETs until retry
// passes; a watch that has not synced within syncWait is bypassed with a GET.
func (s *secretWatches) get(ctx context.Context, cluster, namespace, name string) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	s.mu.Lock()
	if old, ok := s.links[cluster]; ok && old != key {
		s.unlinkLocked(cluster)
	}
	s.links[cluster] = key
	if until, ok := s.refused[key]; ok && s.clock.Now().Before(until) {
		s.mu.Unlock()
		return s.getDirect(ctx, key, errors.New("watching it is refused"))
	}
	delete(s.refused, key)
	w := s.watches[key]
	if w == nil {
		w = s.startLocked(key)
		s.watches[key] = w
	}
	s.mu.Unlock()
	if !w.informer.HasSynced() {
		// Wait for the first list, unless it fails (then a GET says why).
		_ = pollUntil(ctx, s.clock, s.syncWait, func() (bool, error) { return w.informer.HasSynced() || w.err() != nil, nil })
	}
	if !w.informer.HasSynced() {
		return s.getDirect(ctx, key, w.err())
	}
	obj, ok, err := w.informer.GetStore().GetByKey(key.String())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return obj.(*corev1.Secret), nil
}

// getDirect reads the Secret key with a GET; why says why it is not read from a watch.
func (s *secretWatches) getDirect(ctx context.Context, key client.ObjectKey, why error) (*corev1.Secret, error) {
	if s.fallback == nil {
		return nil, fmt.Errorf("the watch of Secret %s has not synced: %v", key, why)
	}
	secret := &corev1.Secret{}
	if err := s.fallback.Get(ctx, key, secret); err != nil {
		return nil, err
	}
	return secret, nil
}

// refuse stops the watch w of key, whose list or watch was refused with err, and reads
// key with GETs until retry passes.
func (s *secretWatches) refuse(key client.ObjectKey, w *secretWatch, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watches[key] != w {
		return
	}
	w.cancel()
	delete(s.watches, key)
	s.refused[key] = s.clock.Now().Add(s.retry)
	secretWatchFallbacks.WithLabelValues(key.String()).Inc()
	s.log.Info("cannot watch the kubeconfig Secret; reading it with GETs", "secret", key.String(),
		"retryAfter", s.retry.String(), "error", err.Error())
}

func (s *secretWatches) startLocked(key client.ObjectKey) *secretWatch {
	ctx, cancel := context.WithCancel(s.ctx)
	w := &secretWatch{cancel: cancel}
	sel := "metadata.name=" + key.Name
	secrets := s.client.CoreV1().Secrets(key.Namespace)
	record := func(err error) {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		if err != nil && refusesWatch(err) {
			go s.refuse(key, w, err)
		}
	}
	lw := recordingListWatch(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return secrets.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return secrets.Watch(ctx, o)
		}, record, func() {})
	inf := newInformer(lw, &corev1.Secret{}, "kubeconfig Secret "+key.String(), func(err error) {
		record(err)
		s.log.V(1).Info("watch error", "secret", key.String(), "error", err.Error())
	}, func(any) { s.fire(key) })
	w.informer = inf
	s.running.goRun(ctx, inf.RunWithContext)
	return w
}

// fire calls changed with the Clusters that reference key.
func (s *secretWatches) fire(key client.ObjectKey) {
	s.mu.Lock()
	var clusters []string
	for c, k := range s.links {
		if k == key {
			clusters = append(clusters, c)
		}
	}
	s.mu.Unlock()
	sort.Strings(clusters)
	if len(clusters) > 0 {
		s.changed(clusters)
	}
}

// unlink drops the Cluster key's reference; a Secret that no Cluster references is no
// longer watched.
func (s *secretWatches) unlink(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlinkLocked(cluster)
}

func (s *secretWatches) unlinkLocked(cluster string) {
	key, ok := s.links[cluster]
	if !ok {
		return
	}
	delete(s.links, cluster)
	for _, k := range s.links {
		if k == key {
			return
		}
	}
	delete(s.refused, key)
	if w := s.watches[key]; w != nil {
		w.cancel()
		delete(s.watches, key)
	}
	forgetSecretMetrics(key.String())
}

// stop ends every Secret watch.
func (s *secretWatches) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, w := range s.watches {
		w.cancel()
		delete(s.watches, k)
	}
	for _, k := range s.links {
		forgetSecretMetrics(k.String())
	}
}

// watched returns the watched Secrets, sorted, for tests.
func (s *secretWatches) watched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedNames(s.watches)
}
