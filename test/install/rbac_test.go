package install

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// auditEvent is what the test reads of an audit event.
type auditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	// ImpersonatedUser is set on a request that the observer made as a read identity.
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Stage string `json:"stage"`
}

// permission is one verb on one resource (resource/subresource) of a group, or on a
// non-resource URL, as a Role grants it.
type permission struct {
	user, group, resource, verb string
}

func (p permission) String() string {
	g := p.group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s: %s %s/%s", strings.TrimPrefix(p.user, "system:serviceaccount:"+namespace+":"), p.verb, g, p.resource)
}

// notExercised are the permissions of the shipped roles that the demo scenario does
// not use, each with why it stays (docs/operations.md, "RBAC", says what breaks without
// it). The test fails for a permission that is neither used nor listed here, and for one
// listed here that the scenario does use.
var notExercised = map[string]string{
	// convoy-api's informers list with a watch that streams the initial state (WatchList)
	// on this kube-apiserver; a server without it, and a re-list after a failed watch,
	// need list. (The observer's informers start with a plain list.)
	"convoy-api: list convoy.kumodo.io/releases":           relist,
	"convoy-api: list convoy.kumodo.io/releaseinventories": relist,
	"convoy-observer: get core/secrets":                    "the kubeconfig Secret of a Cluster with spec.kubeconfigSecretRef (the demo's Cluster is the local one): a GET when its watch is refused",
	"convoy-observer: list core/secrets":                   "the watch of each kubeconfig Secret by name (none in the demo)",
	"convoy-observer: watch core/secrets":                  "the watch of each kubeconfig Secret by name (none in the demo)",
	"convoy-observer: patch core/events":                   "leader election's Events: the recorder patches the count of a repeated Event (one election in the demo)",
	"convoy-observer: patch events.k8s.io/events":          "the recorder patches the series of a repeated Event on a Release or Cluster (no Event repeats in the demo)",
	"convoy-api: get convoy.kumodo.io/releases":            "/health of a Release that convoy-api's cache has not seen yet (the demo's is cached first)",
	"convoy-api: get convoy.kumodo.io/releaseinventories":  "/health of a Release that convoy-api's cache has not seen yet: its inventory is read directly too",
}

// The observer's ServiceAccount and the read identity that the demo sets up for its
// namespace (the observer's default, --default-service-account).
const (
	observerUser = "system:serviceaccount:" + namespace + ":convoy-observer"
	readIdentity = "system:serviceaccount:demo:convoy-health-reader"
)

// TestRBAC checks, from the audit log, that the kube-apiserver refused no request of the
// install's ServiceAccounts, and measures which permissions of the shipped roles they
// used.
func TestRBAC(t *testing.T) {
	r := demo(t)
	f, err := os.Open(r.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used := map[permission]int{}
	var refused []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n, impersonated := 0, 0
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log line %q: %v", sc.Text(), err)
		}
		if e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted" || e.ResponseStatus == nil {
			continue
		}
		n++
		user := e.User.Username
		if e.ImpersonatedUser != nil {
			// A read of a target object as the Release's read identity.
			user = e.ImpersonatedUser.Username
			if e.User.Username != observerUser {
				t.Errorf("%s impersonated %s (%s): only the observer reads as a read identity", e.User.Username, user, e.RequestURI)
			}
			if user != readIdentity {
				t.Errorf("the observer read %s as %s, want the demo's read identity %s", e.RequestURI, user, readIdentity)
			}
			impersonated++
			if e.ResponseStatus.Code != 403 {
				// The request was let through as the read identity: the apiserver checked
				// (it logs no event of its own for that check) the observer's impersonate
				// grant on the ServiceAccount.
				used[permission{user: e.User.Username, verb: "impersonate", resource: "serviceaccounts"}]++
			}
		}
		p := permission{user: user, verb: e.Verb}
		if e.ObjectRef != nil {
			p.group, p.resource = e.ObjectRef.APIGroup, e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				p.resource += "/" + e.ObjectRef.Subresource
			}
		} else {
			p.group, p.resource = "nonResourceURL", strings.SplitN(e.RequestURI, "?", 2)[0]
		}
		if e.ResponseStatus.Code == 403 {
			refused = append(refused, fmt.Sprintf("%s (%s)", p, e.RequestURI))
			continue
		}
		used[p]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("the audit log %s holds no request of the ServiceAccounts", r.auditLog)
	}
	// The observer's own role grants no target read (refused above if it tried one), so
	// every object of the demo was read as the read identity.
	if impersonated == 0 {
		t.Errorf("the observer made no request as the read identity %s", readIdentity)
	}
	slices.Sort(refused)
	for _, s := range slices.Compact(refused) {
		t.Errorf("refused by RBAC: %s", s)
	}
	granted := grantedPermissions(t, r.root)
	var unused, usedList []string
	for _, g := range granted {
		if exercised(g, used) {
			usedList = append(usedList, g.String())
			if why, ok := notExercised[g.String()]; ok {
				t.Errorf("%s is listed as not exercised (%s) but the scenario used it", g, why)
			}
			continue
		}
		unused = append(unused, g.String())
		if _, ok := notExercised[g.String()]; !ok {
			t.Errorf("granted but never used by the scenario, and no reason listed in notExercised: %s", g)
		}
	}
	sort.Strings(usedList)
	sort.Strings(unused)
	t.Logf("%d requests of the ServiceAccounts; %d granted permissions used:\n  %s", n, len(usedList), strings.Join(usedList, "\n  "))
	t.Logf("granted, not used by the scenario (%d):\n  %s", len(unused), strings.Join(unused, "\n  "))
}

// exercised reports whether the granted permission g (resource "*" matches any) was used.
func exercised(g permission, used map[permission]int) bool {
	for u := range used {
		if u.user == g.user && u.verb == g.verb && (g.group == "*" || u.group == g.group) && (g.resource == "*" || u.resource == g.resource) {
			return true
		}
	}
	return false
}

// grantedPermissions expands the rules of the Roles and ClusterRoles of config/default
// bound to the install's ServiceAccounts into permissions.
func grantedPermissions(t *testing.T, root string) []permission {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string][]rbacv1.PolicyRule{} // "ClusterRole/NAME" or "Role/NS/NAME"
	var bindings []rbacv1.RoleBinding         // ClusterRoleBindings converted
	for _, r := range m.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			mustUnmarshal(t, data, &cr)
			roles["ClusterRole/"+cr.Name] = cr.Rules
		case "Role":
			var ro rbacv1.Role
			mustUnmarshal(t, data, &ro)
			roles["Role/"+ro.Namespace+"/"+ro.Name] = ro.Rules
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			mustUnmarshal(t, data, &b)
			bindings = append(bindings, rbacv1.RoleBinding{Subjects: b.Subjects, RoleRef: b.RoleRef})
		case "RoleBinding":
			var b rbacv1.RoleBinding
			mustUnmarshal(t, data, &b)
			bindings = append(bindings, b)
		}
	}
	seen := map[permission]bool{}
	var out []permission
	for _, b := range bindings {
		key := "ClusterRole/" + b.RoleRef.Name
		if b.RoleRef.Kind == "Role" {
			key = "Role/" + b.Namespace + "/" + b.RoleRef.Name
		}
		rules, ok := roles[key]
		if !ok {
			continue // a built-in role (system:auth-delegator, extension-apiserver-authentication-reader)
		}
		for _, s := range b.Subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != namespace {
				continue
			}
			user := "system:serviceaccount:" + s.Namespace + ":" + s.Name
			for _, rule := range rules {
				for _, v := range rule.Verbs {
					for _, u := range rule.NonResourceURLs {
						add(&out, seen, permission{user, "nonResourceURL", u, v})
					}
					for _, g := range rule.APIGroups {
						for _, res := range rule.Resources {
							add(&out, seen, permission{user, g, res, v})
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("config/default grants its ServiceAccounts nothing")
	}
	return out
}

func add(out *[]permission, seen map[permission]bool, p permission) {
	if !seen[p] {
		seen[p] = true
		*out = append(*out, p)
	}
}

func mustUnmarshal(t *testing.T, data []byte, into any) {
	t.Helper()
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}
