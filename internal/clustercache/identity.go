package clustercache

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// The read identity (docs/design.md, "Read identity"): a Release's target objects are
// read as a ServiceAccount of its Cluster's namespace, never with more rights than that
// ServiceAccount has, so that a tenant who writes a Release, a rule or an inventory reads
// nothing through the observer that its own namespace's identity cannot read.

// ReaderRoleName is the ClusterRole that config/rbac ships for read identities (get, list
// and watch on every resource), meant to be bound in a namespace with a RoleBinding; the
// hint of a ForbiddenError names it.
const ReaderRoleName = "convoy-health-reader"

// serviceAccountOf returns the ServiceAccount (of cluster's namespace) whose identity
// reads cluster's objects, or "" when they are read with the client config's own
// identity: the Cluster's serviceAccountName when set; else, for a Cluster without
// kubeconfigSecretRef, o.DefaultServiceAccount unless o.UnsafeReadAsObserver; else ""
// (the kubeconfig's own credentials are the tenant's).
func serviceAccountOf(o *Options, cluster *v1alpha1.Cluster) string {
	if sa := cluster.Spec.ServiceAccountName; sa != "" {
		return sa
	}
	if cluster.Spec.KubeconfigSecretRef == nil && !o.UnsafeReadAsObserver {
		return o.DefaultServiceAccount
	}
	return ""
}

// ReadIdentity returns the user name that the cache reads cluster's objects as
// ("system:serviceaccount:NAMESPACE:NAME"), or "" when it uses the client config's own
// identity (a kubeconfig's, or the observer's with Options.UnsafeReadAsObserver).
func (c *Cache) ReadIdentity(cluster *v1alpha1.Cluster) string {
	if sa := serviceAccountOf(&c.opts, cluster); sa != "" {
		return serviceaccount.MakeUsername(cluster.Namespace, sa)
	}
	return ""
}

// ForbiddenError is a read that the read identity may not make (a 403 from the target).
// Its message names the identity, what it may not read and the command that grants it,
// and never quotes the server's answer. errors.As finds it; Unwrap gives the API error.
type ForbiddenError struct {
	// Identity is the impersonated user, "system:serviceaccount:NS:NAME".
	Identity string
	// GVR, Namespace and Name are the object ("" namespace: cluster-scoped).
	GVR             schema.GroupVersionResource
	Namespace, Name string
	// Impersonation is true when the observer itself may not impersonate Identity.
	Impersonation bool
	// Verb is the refused verb: "get", or "list" for an ObjectLister's LIST.
	Verb string
	Err  error
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

func (e *ForbiddenError) Error() string {
	saNS, sa, _ := serviceaccount.SplitUsername(e.Identity)
	if e.Impersonation {
		return fmt.Sprintf("403 Forbidden: the observer may not impersonate %s (it needs impersonate on serviceaccounts; config/rbac grants it with the ClusterRole convoy-observer-impersonator)", e.Identity)
	}
	resource := e.GVR.GroupResource().String()
	verb := e.Verb
	if verb == "" {
		verb = "get"
	}
	if e.Namespace == "" {
		// The empty namespace is the inventory's, which a tenant chooses: it does not say
		// that the kind is cluster-scoped (secrets with no namespace is a read of every
		// Secret). So no command that grants a cluster-wide read is printed for it.
		return fmt.Sprintf("403 Forbidden: %s may not %s %s with no namespace; if %s is cluster-scoped and this Release should read it, "+
			"a platform may grant that kind alone to %s (docs/security.md, \"Read identity\"); a namespaced kind needs the entry's namespace",
			e.Identity, verb, resource, resource, e.Identity)
	}
	binding := sa
	if saNS != e.Namespace {
		binding = saNS + "-" + sa
	}
	return fmt.Sprintf("403 Forbidden: %s may not %s %s in namespace %s; grant it: kubectl create rolebinding %s --clusterrole=%s --serviceaccount=%s:%s -n %s",
		e.Identity, verb, resource, e.Namespace, binding, ReaderRoleName, saNS, sa, e.Namespace)
}

// asForbidden wraps a 403 of a read made as identity in a ForbiddenError; any other
// error, or a read without a read identity, is returned as it is.
func asForbidden(err error, identity string, gvr schema.GroupVersionResource, namespace, name string) error {
	if identity == "" || !apierrors.IsForbidden(err) {
		return err
	}
	var fe *ForbiddenError
	if errors.As(err, &fe) {
		return err
	}
	return &ForbiddenError{Identity: identity, GVR: gvr, Namespace: namespace, Name: name,
		Impersonation: refusedImpersonation(err), Err: err}
}

// refusedImpersonation reports whether a 403 refused the impersonation itself rather
// than the read. The API server's impersonation filter answers with details naming the
// resource "serviceaccounts" (or "users") and a message "… cannot impersonate …"; the
// Status has no reason of its own for it, so the message is the only mark.
func refusedImpersonation(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	return strings.Contains(status.Status().Message, "cannot impersonate")
}
