package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// snapshot is what the demo sees of its Release at one moment: the Release (for its
// Healthy condition and sync annotation) and the /health answer of convoy-api.
type snapshot struct {
	// At is when it was taken.
	At time.Time
	// Release is the Release as read from the API server.
	Release *v1alpha1.Release
	// Health is the answer of GET …/releases/demo/health.
	Health *syncapi.HealthResult
	// Syncs counts the sync requests seen since the demo started.
	Syncs int
}

// condition returns the Healthy condition, or nil.
func (s *snapshot) condition() *metav1.Condition {
	return meta.FindStatusCondition(s.Release.Status.Conditions, v1alpha1.ConditionHealthy)
}

// entry returns the /health entry of kind namespace/name, or nil.
func (s *snapshot) entry(kind, namespace, name string) *syncapi.HealthEntry {
	for i := range s.Health.Entries {
		e := &s.Health.Entries[i]
		if e.Kind == kind && e.Namespace == namespace && e.Name == name {
			return e
		}
	}
	return nil
}

// hook returns the /health hook name, or nil.
func (s *snapshot) hook(name string) *syncapi.HealthHook {
	for i := range s.Health.Hooks {
		if s.Health.Hooks[i].Name == name {
			return &s.Health.Hooks[i]
		}
	}
	return nil
}

// monitor takes snapshots of the Release and counts the observer's sync requests: a
// sync request is a new value of the annotation convoy.kumodo.io/sync-requested-at,
// which convoy-api's /sync endpoint sets when the observer calls it.
type monitor struct {
	c         client.Client
	api       *syncapiclient.Client
	namespace string
	name      string

	syncs          int
	lastAnnotation string
	// onSync, when set, is called with the count and the annotation at each new sync.
	onSync func(n int, at string)
}

// take reads the Release and its /health answer.
func (m *monitor) take(ctx context.Context) (*snapshot, error) {
	rel := &v1alpha1.Release{}
	if err := m.c.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: m.name}, rel); err != nil {
		return nil, fmt.Errorf("reading Release %s/%s: %w", m.namespace, m.name, err)
	}
	if at := rel.Annotations[v1alpha1.SyncRequestedAtAnnotation]; at != "" && at != m.lastAnnotation {
		m.lastAnnotation = at
		m.syncs++
		if m.onSync != nil {
			m.onSync(m.syncs, at)
		}
	}
	h, err := m.api.Health(ctx, m.namespace, m.name)
	if err != nil {
		return nil, fmt.Errorf("asking convoy-api for the health: %w", err)
	}
	return &snapshot{At: time.Now(), Release: rel, Health: h, Syncs: m.syncs}, nil
}
