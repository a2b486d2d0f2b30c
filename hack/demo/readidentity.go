package main

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// grantReadIdentity sets up, as a platform would, the identity that the observer reads
// the demo's objects as (docs/security.md, "Read identity"): the ServiceAccount
// convoy-health-reader of the demo namespace (the observer's --default-service-account),
// bound to the ClusterRole convoy-health-reader in that namespace, and a narrow grant of
// persistentvolumes (cluster-scoped: the demo's PersistentVolume is an entry too).
func grantReadIdentity(ctx context.Context, c client.Client) error {
	const sa = clustercache.DefaultServiceAccount
	read := []string{"get", "list", "watch"}
	pvRole := clustercache.ReaderRoleName + "-persistentvolumes"
	subject := rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(sa).WithNamespace(demoNamespace)
	objects := []struct {
		what string
		ac   runtime.ApplyConfiguration
	}{
		{"ServiceAccount " + sa, corev1ac.ServiceAccount(sa, demoNamespace)},
		// As config/rbac/health_reader_role.yaml ships it (the demo without --install
		// does not apply config/default).
		{"ClusterRole " + clustercache.ReaderRoleName, rbacv1ac.ClusterRole(clustercache.ReaderRoleName).
			WithRules(rbacv1ac.PolicyRule().WithAPIGroups("*").WithResources("*").WithVerbs(read...))},
		{"RoleBinding " + sa, rbacv1ac.RoleBinding(sa, demoNamespace).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(clustercache.ReaderRoleName)).
			WithSubjects(subject)},
		{"ClusterRole " + pvRole, rbacv1ac.ClusterRole(pvRole).
			WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("persistentvolumes").WithVerbs(read...))},
		{"ClusterRoleBinding " + demoNamespace + "-" + pvRole, rbacv1ac.ClusterRoleBinding(demoNamespace + "-" + pvRole).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(pvRole)).
			WithSubjects(subject)},
	}
	for _, o := range objects {
		if err := c.Apply(ctx, o.ac, client.FieldOwner(platformManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", o.what, err)
		}
	}
	return nil
}
