package config_test

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// checkObserverRBAC checks the observer's ServiceAccount holds exactly the documented grants.
func checkObserverRBAC(t *testing.T, objs objects) {
	got := grantsOf(t, objs, namespace, "convoy-observer")
	want := grantSet{}
	want.add("", "convoy.kumodo.io", []string{"releases"}, "get", "list", "watch")
	want.add("", "convoy.kumodo.io", []string{"clusters"}, "list", "watch") // cache only, no GET (test/install)
	want.add("", "convoy.kumodo.io", []string{"releases/status"}, "patch")
	want.add("", "convoy.kumodo.io", []string{"releaseinventories"}, "list", "watch", "patch")
	want.add("", "extensions.convoy.kumodo.io", []string{"globalhealthrulesets", "healthrulesets"}, "list", "watch")
	want.add("", "", []string{"secrets"}, "get", "list", "watch")
	want.add("", "events.k8s.io", []string{"events"}, "create", "patch") // Events on Releases and Clusters
	// The read identity: impersonation of ServiceAccounts, never a read of its own.
	want.add("", "", []string{"serviceaccounts"}, "impersonate")
	want.add(namespace, "coordination.k8s.io", []string{"leases"}, "get", "create", "update")
	want.add(namespace, "", []string{"events"}, "create", "patch")
	want.add(namespace, "events.k8s.io", []string{"events"}, "create", "patch")
	want.add("", "subresources.convoy.kumodo.io", []string{"releases/sync"}, "create") // wake-ups
	got.mustEqual(t, want)

	// Spelled out, though mustEqual implies them.
	for g := range got {
		switch {
		case g.verb == "*" || g.resource == "*" && g.verb != "get":
			t.Errorf("wildcard grant %v", g)
		case g.resource == "releases" && g.verb != "get" && g.verb != "list" && g.verb != "watch":
			t.Errorf("the observer must not %s releases (it writes only releases/status)", g.verb)
		case g.resource == "releaseinventories" && slices.Contains([]string{"create", "update", "delete", "deletecollection"}, g.verb):
			t.Errorf("the observer must not %s releaseinventories (Server-Side Apply is patch)", g.verb)
		case g.resource == "secrets" && g.verb != "get" && g.verb != "list" && g.verb != "watch":
			t.Errorf("the observer must not %s secrets (it watches each kubeconfig Secret by name)", g.verb)
		}
	}

	// A grant on every resource only in the clearly labelled, unbound reader role of
	// read identities (config/rbac/health_reader_role.yaml), which no ClusterRoleBinding
	// of the install may bind: a platform binds it per namespace.
	for _, o := range objs.ofKind("ClusterRole") {
		var cr rbacv1.ClusterRole
		o.decode(t, &cr)
		wide := false
		for _, r := range cr.Rules {
			wide = wide || slices.Contains(r.APIGroups, "*") || slices.Contains(r.Resources, "*")
		}
		if !wide {
			continue
		}
		if cr.Labels[readerRoleLabel] != readerRoleValue {
			t.Errorf("ClusterRole %s grants on every resource but lacks the label %s=%s", cr.Name, readerRoleLabel, readerRoleValue)
		}
		want := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}
		if !reflect.DeepEqual(cr.Rules, want) {
			t.Errorf("ClusterRole %s rules = %+v, want only get, list, watch on every resource", cr.Name, cr.Rules)
		}
		for _, b := range append(objs.ofKind("ClusterRoleBinding"), objs.ofKind("RoleBinding")...) {
			var rb rbacv1.ClusterRoleBinding
			b.decode(t, &rb)
			if rb.RoleRef.Name == cr.Name {
				t.Errorf("%s binds %s: the install must leave the read identity's role unbound", b, cr.Name)
			}
		}
	}
}

// checkAPIRBAC checks convoy-api's ServiceAccount holds exactly the documented grants.
func checkAPIRBAC(t *testing.T, objs objects) {
	got := grantsOf(t, objs, namespace, "convoy-api")
	want := grantSet{}
	want.add("", "convoy.kumodo.io", []string{"releases"}, "get", "list", "watch", "patch")
	want.add("", "convoy.kumodo.io", []string{"releaseinventories"}, "get", "list", "watch")
	// Nothing else of the management cluster (/health is built from the inventory): no
	// Cluster, no Secret, no rule set, no target object, not even through the optional
	// local-cluster reader.
	// Delegated authentication and authorization (built-in roles).
	want.add("", "authentication.k8s.io", []string{"tokenreviews"}, "create")
	want.add("", "authorization.k8s.io", []string{"subjectaccessreviews"}, "create")
	want.add("kube-system", "", []string{"configmaps/extension-apiserver-authentication"}, "get", "list", "watch")
	got.mustEqual(t, want)

	// The subject of the kube-system RoleBinding follows the install namespace.
	var rb rbacv1.RoleBinding
	objs.get(t, "RoleBinding", "kube-system", "convoy-api-auth-reader").decode(t, &rb)
	if len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != namespace {
		t.Errorf("RoleBinding kube-system/convoy-api-auth-reader subjects = %+v, want the ServiceAccount in %s", rb.Subjects, namespace)
	}
}

// checkUserRoles checks the user roles of the Release subresources and the tenant roles:
// no tenant role may write ReleaseInventories (the controller-manager's: its entries
// decide what the observer reads) or GlobalHealthRuleSets.
func checkUserRoles(t *testing.T, objs objects) {
	for _, name := range []string{"convoy-tenant-edit", "convoy-tenant-view"} {
		var cr rbacv1.ClusterRole
		objs.get(t, "ClusterRole", "", name).decode(t, &cr)
		for _, r := range cr.Rules {
			for _, res := range r.Resources {
				writes := slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
				if writes && (res == "releaseinventories" || res == "globalhealthrulesets" || res == "releases/status" || res == "*") {
					t.Errorf("tenant role %s may %v %s", name, r.Verbs, res)
				}
			}
		}
	}
	for name, want := range map[string]rbacv1.PolicyRule{
		"convoy-release-sync":          {APIGroups: []string{"subresources.convoy.kumodo.io"}, Resources: []string{"releases/sync"}, Verbs: []string{"create"}},
		"convoy-release-health-reader": {APIGroups: []string{"subresources.convoy.kumodo.io"}, Resources: []string{"releases/health"}, Verbs: []string{"get"}},
	} {
		var cr rbacv1.ClusterRole
		objs.get(t, "ClusterRole", "", name).decode(t, &cr)
		if !reflect.DeepEqual(cr.Rules, []rbacv1.PolicyRule{want}) {
			t.Errorf("ClusterRole %s rules = %+v, want %+v", name, cr.Rules, want)
		}
	}
}

// grant is one permission: scope "" is cluster-wide, else the namespace of a RoleBinding.
type grant struct {
	scope, group, resource, verb string
}

type grantSet map[grant]bool

func (s grantSet) add(scope, group string, resources []string, verbs ...string) {
	for _, r := range resources {
		for _, v := range verbs {
			s[grant{scope, group, r, v}] = true
		}
	}
}

func (s grantSet) mustEqual(t *testing.T, want grantSet) {
	t.Helper()
	var extra, missing []string
	for g := range s {
		if !want[g] {
			extra = append(extra, fmt.Sprintf("%+v", g))
		}
	}
	for g := range want {
		if !s[g] {
			missing = append(missing, fmt.Sprintf("%+v", g))
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	for _, g := range extra {
		t.Errorf("grants more than documented: %s", g)
	}
	for _, g := range missing {
		t.Errorf("lacks %s", g)
	}
}

// builtinRoles are the rules of the Kubernetes bootstrap roles that the manifests bind,
// by kind/namespace/name: they are not rendered.
var builtinRoles = map[string][]rbacv1.PolicyRule{
	"ClusterRole//system:auth-delegator": {
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	},
	"Role/kube-system/extension-apiserver-authentication-reader": {
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"extension-apiserver-authentication"}, Verbs: []string{"get", "list", "watch"}},
	},
}

// grantsOf collects what the rendered bindings grant the ServiceAccount namespace/name.
// Every roleRef must resolve to a rendered role; resourceNames are not used.
func grantsOf(t *testing.T, objs objects, saNamespace, saName string) grantSet {
	t.Helper()
	out := grantSet{}
	bound := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == saName && s.Namespace == saNamespace {
				return true
			}
		}
		return false
	}
	objs.get(t, "ServiceAccount", saNamespace, saName)
	addRules := func(scope string, rules []rbacv1.PolicyRule, role string) {
		for _, r := range rules {
			if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 1 || len(r.ResourceNames) == 1 && len(r.Resources) != 1 {
				t.Errorf("%s: rule %+v uses nonResourceURLs or several resourceNames", role, r)
			}
			if len(r.ResourceNames) == 1 { // counted as the grant on resource/name
				r.Resources = []string{r.Resources[0] + "/" + r.ResourceNames[0]}
			}
			for _, g := range r.APIGroups {
				out.add(scope, g, r.Resources, r.Verbs...)
			}
		}
	}
	roleRules := func(kind, ns, name string) []rbacv1.PolicyRule {
		if rules, ok := builtinRoles[kind+"/"+ns+"/"+name]; ok {
			return rules
		}
		var role rbacv1.ClusterRole // Role has the same shape (rules)
		objs.get(t, kind, ns, name).decode(t, &role)
		return role.Rules
	}
	for _, o := range objs.ofKind("ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		o.decode(t, &b)
		if bound(b.Subjects) {
			if b.RoleRef.Kind != "ClusterRole" {
				t.Fatalf("%s: roleRef %+v", o, b.RoleRef)
			}
			addRules("", roleRules("ClusterRole", "", b.RoleRef.Name), b.RoleRef.Name)
		}
	}
	for _, o := range objs.ofKind("RoleBinding") {
		var b rbacv1.RoleBinding
		o.decode(t, &b)
		if !bound(b.Subjects) {
			continue
		}
		switch b.RoleRef.Kind {
		case "Role":
			addRules(b.Namespace, roleRules("Role", b.Namespace, b.RoleRef.Name), b.RoleRef.Name)
		case "ClusterRole":
			addRules(b.Namespace, roleRules("ClusterRole", "", b.RoleRef.Name), b.RoleRef.Name)
		default:
			t.Fatalf("%s: roleRef %+v", o, b.RoleRef)
		}
	}
	return out
}
