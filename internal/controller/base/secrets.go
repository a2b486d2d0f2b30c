package base

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
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
	log      logr.Logger
	changed  func(clusters []string)

	mu      sync.Mutex
	watches map[client.ObjectKey]*secretWatch
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

func newSecretWatches(c kubernetes.Interface, fallback client.Reader, syncWait time.Duration, log logr.Logger, changed func([]string)) *secretWatches {
	return &secretWatches{client: c, fallback: fallback, syncWait: syncWait, log: log, changed: changed,
		watches: map[client.ObjectKey]*secretWatch{}, links: map[string]client.ObjectKey{}}
}

// get returns the Secret namespace/name that the Cluster key references, from its
// watch (started on first use). A watch that is refused (RBAC without list/watch on
// Secrets) or has not synced within syncWait is bypassed with a GET.
func (s *secretWatches) get(ctx context.Context, cluster, namespace, name string) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	s.mu.Lock()
	if old, ok := s.links[cluster]; ok && old != key {
		s.unlinkLocked(cluster)
	}
	s.links[cluster] = key
	w := s.watches[key]
	if w == nil {
		w = s.startLocked(key)
		s.watches[key] = w
	}
	s.mu.Unlock()
	if !w.informer.HasSynced() {
		// Wait for the first list, unless it fails (then a GET says why).
		_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, s.syncWait, true,
			func(context.Context) (bool, error) { return w.informer.HasSynced() || w.err() != nil, nil })
	}
	if !w.informer.HasSynced() {
		if s.fallback == nil {
			return nil, fmt.Errorf("the watch of Secret %s has not synced: %v", key, w.err())
		}
		secret := &corev1.Secret{}
		if err := s.fallback.Get(ctx, key, secret); err != nil {
			return nil, err
		}
		return secret, nil
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

func (s *secretWatches) startLocked(key client.ObjectKey) *secretWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &secretWatch{cancel: cancel}
	sel := "metadata.name=" + key.Name
	secrets := s.client.CoreV1().Secrets(key.Namespace)
	record := func(err error) {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
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
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, &corev1.Secret{},
		toolscache.SharedIndexInformerOptions{ObjectDescription: "kubeconfig Secret " + key.String()})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		record(err)
		s.log.V(1).Info("watch error", "secret", key.String(), "error", err.Error())
	})
	_, _ = inf.AddEventHandler(changeHandler(func(any) { s.fire(key) }))
	w.informer = inf
	go inf.RunWithContext(ctx)
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
	if w := s.watches[key]; w != nil {
		w.cancel()
		delete(s.watches, key)
	}
}

// watched returns the watched Secrets, sorted, for tests.
func (s *secretWatches) watched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedNames(s.watches)
}
