package scale

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// setup creates the namespaces, Clusters, the rule sets of the selection, the
// Deployments with a healthy status, the Releases, their inventories and lastAttempted.
func (r *run) setup(ctx context.Context) error {
	files, err := r.ruleFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := testenv.ApplyFile(ctx, r.c, f, "bench"); err != nil {
			return err
		}
	}
	r.report.RuleSets = len(files)
	if r.cfg.Clusters > 0 {
		if err := r.setupFleetAccess(ctx); err != nil {
			return err
		}
	}
	for n := 0; n < r.namespaces(); n++ {
		ns := fmt.Sprintf("bench-%d", n)
		if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.clusterName()}}
		if r.cfg.Clusters > 0 {
			ref, err := r.fleetSecret(ctx, ns, n)
			if err != nil {
				return err
			}
			cluster.Spec.KubeconfigSecretRef = ref
			cluster.Spec.Shard = r.shardName(n % max(r.cfg.Shards, 1))
		}
		if err := r.c.Create(ctx, cluster); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := 0; i < r.cfg.Releases; i++ {
		g.Go(func() error { return r.setupRelease(gctx, i) })
	}
	return g.Wait()
}

// shardName is the name of shard i of Config.Shards: "" (the default shard) for 0, then
// s1, s2, ….
func (r *run) shardName(i int) string {
	if i == 0 {
		return ""
	}
	return fmt.Sprintf("s%d", i)
}

// fleetGroup is the group of every fleet user: one ClusterRoleBinding lets them read
// what the observer reads of a workload.
const fleetGroup = "bench:fleet"

// clusterName is the name of every namespace's Cluster: "local" (the management
// cluster) or, in the fleet mode, "fleet" (a remote Cluster).
func (r *run) clusterName() string {
	if r.cfg.Clusters > 0 {
		return "fleet"
	}
	return "local"
}

// setupFleetAccess lets fleetGroup get, list and watch workloads and their Pods.
func (r *run) setupFleetAccess(ctx context.Context) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-fleet-read"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	}}
	if err := r.c.Create(ctx, role); err != nil {
		return err
	}
	return r.c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-fleet-read"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: fleetGroup}}})
}

// fleetSecret creates the kubeconfig Secret of Cluster n in ns: a user of its own
// (fleet-n, a client certificate) in fleetGroup, on the local API server.
func (r *run) fleetSecret(ctx context.Context, ns string, n int) (*v1alpha1.SecretKeyReference, error) {
	kubeconfig, err := r.env.UserKubeconfig(fmt.Sprintf("fleet-%d", n), fleetGroup)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": kubeconfig}}
	if err := r.create(ctx, secret); err != nil {
		return nil, err
	}
	return &v1alpha1.SecretKeyReference{Name: secret.Name, Key: "kubeconfig"}, nil
}

// ruleFiles returns the files of the rule selection (Config.Rules).
func (r *run) ruleFiles() ([]string, error) {
	files := []string{filepath.Join(r.env.RepoRoot, "health", "convoy-defaults.yaml")}
	if r.cfg.Rules != RulesLibrary {
		return files, nil
	}
	library, err := filepath.Glob(filepath.Join(r.env.RepoRoot, "health", "library", "*.yaml"))
	if err != nil || len(library) == 0 {
		return nil, fmt.Errorf("no rule sets under health/library (%v)", err)
	}
	files = append(files, library...)
	return append(files, filepath.Join(r.env.RepoRoot, "health", "generic.yaml")), nil
}

func (r *run) setupRelease(ctx context.Context, i int) error {
	ns := r.nsOf(i)
	entries := make([]*acv1alpha1.InventoryEntryApplyConfiguration, 0, r.cfg.Objects)
	for j := 0; j < r.cfg.Objects; j++ {
		name := deployName(i, j)
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}
		if err := r.create(ctx, d); err != nil {
			return err
		}
		if err := retryTransient(ctx, func() error { return r.setStatus(ctx, d, true) }); err != nil {
			return err
		}
		entries = append(entries, inventory.RecordEntry(&v1alpha1.InventoryEntry{
			Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments",
			Namespace: ns, Name: name, Wave: ptr.To[int32](0), RenderRef: "r1",
		}))
	}
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: relName(i)},
		Spec: v1alpha1.ReleaseSpec{
			ClusterRef:       v1alpha1.ClusterReference{Name: r.clusterName()},
			HealthAssessment: &v1alpha1.HealthAssessment{GlobalRuleSetSelector: &metav1.LabelSelector{}},
			SyncPolicy:       &v1alpha1.SyncPolicy{Interval: &metav1.Duration{Duration: r.cfg.Interval}},
		},
	}
	if err := r.create(ctx, rel); err != nil {
		return err
	}
	inv := acv1alpha1.ReleaseInventory(relName(i), ns).WithEntries(entries...)
	if err := retryTransient(ctx, func() error {
		return r.c.Apply(ctx, inv, client.FieldOwner("convoy-controller-manager"))
	}); err != nil {
		return err
	}
	st := acv1alpha1.Release(relName(i), ns).WithStatus(acv1alpha1.ReleaseStatus().
		WithLastAttempted(acv1alpha1.AttemptStatus().WithRenderRef("r1")))
	return retryTransient(ctx, func() error {
		return r.c.Status().Apply(ctx, st, client.FieldOwner("convoy-controller-manager"))
	})
}

// create creates obj, retrying what an overloaded API server refuses for a while; an
// object that a timed-out attempt did create is read back.
func (r *run) create(ctx context.Context, obj client.Object) error {
	return retryTransient(ctx, func() error {
		err := r.c.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			return r.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		}
		return err
	})
}

// retryTransient runs fn until it succeeds, fails for good, or ctx ends: the setup of a
// big N on a small machine meets timeouts and throttling (a conflict after a timed-out
// status write is retried too: setStatus re-reads nothing, so it is refreshed first).
func retryTransient(ctx context.Context, fn func() error) error {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if err = fn(); err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * time.Second):
		}
	}
	return err
}

func transient(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded)
}

// setStatus writes the Deployment's status: all replicas ready, or none. A conflict
// (a timed-out earlier attempt went through) re-reads the Deployment and tries again.
func (r *run) setStatus(ctx context.Context, d *appsv1.Deployment, ready bool) error {
	err := r.writeStatus(ctx, d, ready)
	if apierrors.IsConflict(err) {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		return r.writeStatus(ctx, d, ready)
	}
	return err
}

func (r *run) writeStatus(ctx context.Context, d *appsv1.Deployment, ready bool) error {
	n := int32(0)
	if ready {
		n = 1
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n}
	if d.Generation == 0 {
		d.Status.ObservedGeneration = 1
	}
	return r.c.Status().Update(ctx, d)
}
