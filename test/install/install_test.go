// Package install tests the install as shipped: config/default applied to a real
// kube-apiserver, convoy-api and convoy-observer run with the tokens of its
// ServiceAccounts and its arguments behind its APIService, the demo scenario through
// them (hack/demo --install), and then what they did and what they expose:
//
//   - every request of the two ServiceAccounts, from the kube-apiserver's audit log: none
//     refused, and every permission of the shipped roles either used or listed in
//     notExercised with the reason it stays (least privilege, measured);
//   - config/monitoring: the rules pass Prometheus' own rule parser (hack/promrules), and
//     every metric and label that an alert or a dashboard query names is exposed by the
//     observer or convoy-api (their /metrics at the end of the scenario, or, for a series
//     that only an event outside the scenario creates, the metric's declaration in
//     internal/).
package install

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kumodo/convoy-observer/internal/localcluster"
	"github.com/kumodo/convoy-observer/internal/testenv"
)

// namespace is config/default's.
const namespace = "convoy-system"

// run is one run of the demo on the install, shared by the tests.
type run struct {
	root, out, auditLog, metricsDir string
	err                             error
}

var shared *run

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		_ = os.RemoveAll(filepath.Dir(shared.auditLog))
	}
	os.Exit(code)
}

// demo runs `demo --once --install` once for every test of the package.
func demo(t *testing.T) *run {
	t.Helper()
	if shared != nil {
		if shared.err != nil {
			t.Fatalf("the demo on the install failed: %v\n%s", shared.err, shared.out)
		}
		return shared
	}
	shared = &run{}
	r := shared
	fail := func(format string, args ...any) {
		r.err = fmt.Errorf(format, args...)
		t.Fatalf("%v\n%s", r.err, r.out)
	}
	var err error
	if r.root, err = testenv.RepoRoot(); err != nil {
		fail("%v", err)
	}
	assets, err := localcluster.FindAssets(r.root)
	if err != nil {
		fail("%v", err)
	}
	dir, err := os.MkdirTemp("", "convoy-install-")
	if err != nil {
		fail("%v", err)
	}
	r.auditLog, r.metricsDir = filepath.Join(dir, "audit.log"), filepath.Join(dir, "metrics")
	bin := filepath.Join(dir, "demo")
	build := exec.Command("go", "build", "-o", bin, "./hack/demo")
	build.Dir = r.root
	if out, err := build.CombinedOutput(); err != nil {
		fail("go build ./hack/demo: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--once", "--install", "--timeout=10m", "--audit-log="+r.auditLog, "--metrics-dir="+r.metricsDir)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+assets)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	r.out = out.String()
	if err != nil {
		fail("demo --once --install: %v", err)
	}
	return r
}

// TestScenario checks that the demo scenario reached every expected state with the
// components running as shipped.
func TestScenario(t *testing.T) {
	r := demo(t)
	for _, want := range []string{
		"convoy-api and convoy-observer run as the ServiceAccounts convoy-system/convoy-api and convoy-system/convoy-observer",
		"demo: PASS in ",
		"Healthy=True (Healthy): 5/5 healthy",
		"final state: Healthy=False (Degraded); 5 entries: 4 Healthy, 0 Progressing, 1 Degraded, 0 Unknown",
		"convoyctl release wait exited 0",
		"convoyctl release wait exited 3",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output of the demo:\n%s", r.out)
	}
}

// auditEvent is what the test reads of an audit event.
type auditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
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
	// Informers list with a watch that streams the initial state (WatchList) on this
	// kube-apiserver; a server without it, and a re-list after a failed watch, need list.
	"convoy-observer: list convoy.kumodo.io/releases":                        relist,
	"convoy-observer: list convoy.kumodo.io/clusters":                        relist,
	"convoy-observer: list convoy.kumodo.io/releaseinventories":              relist,
	"convoy-observer: list extensions.convoy.kumodo.io/globalhealthrulesets": relist,
	"convoy-observer: list extensions.convoy.kumodo.io/healthrulesets":       relist,
	"convoy-observer: list apps/deployments":                                 relist,
	"convoy-observer: list apps/statefulsets":                                relist,
	"convoy-observer: list apps/daemonsets":                                  relist,
	"convoy-observer: list batch/jobs":                                       relist,
	"convoy-api: list convoy.kumodo.io/releases":                             relist,
	"convoy-api: list convoy.kumodo.io/releaseinventories":                   relist,
	// The local-cluster watcher's kinds that the demo's Release does not record.
	"convoy-observer: list core/pods":                             localKind,
	"convoy-observer: watch core/pods":                            localKind,
	"convoy-observer: list core/services":                         localKind,
	"convoy-observer: watch core/services":                        localKind,
	"convoy-observer: list core/configmaps":                       localKind,
	"convoy-observer: watch core/configmaps":                      localKind,
	"convoy-observer: list core/persistentvolumeclaims":           localKind,
	"convoy-observer: list core/persistentvolumes":                localKind,
	"convoy-observer: list networking.k8s.io/ingresses":           localKind,
	"convoy-observer: watch networking.k8s.io/ingresses":          localKind,
	"convoy-observer: get core/secrets":                           "the kubeconfig Secret of a Cluster with spec.kubeconfigSecretRef (the demo's Cluster is the local one): a GET when its watch is refused",
	"convoy-observer: list core/secrets":                          "the watch of each kubeconfig Secret by name (none in the demo)",
	"convoy-observer: watch core/secrets":                         "the watch of each kubeconfig Secret by name (none in the demo)",
	"convoy-observer: patch core/events":                          "leader election's Events: the recorder patches the count of a repeated Event (one election in the demo)",
	"convoy-observer: patch events.k8s.io/events":                 "the recorder patches the series of a repeated Event on a Release or Cluster (no Event repeats in the demo)",
	"convoy-api: get convoy.kumodo.io/releases":                   "/health of a Release that convoy-api's cache has not seen yet (the demo's is cached first)",
	"convoy-api: get convoy.kumodo.io/releaseinventories":         "/health of a Release that convoy-api's cache has not seen yet: its inventory is read directly too",
	"convoy-api: list extensions.convoy.kumodo.io/healthrulesets": "decidedBy of a Release that selects HealthRuleSets of its namespace (the demo's selects only GlobalHealthRuleSets)",
	"convoy-api: get core/secrets":                                "decidedBy of a Release whose Cluster has a kubeconfig Secret (the demo's Cluster is the local one)",
}

const (
	relist    = "informers' list: on this kube-apiserver the initial state streams in a watch (WatchList); an older one, and a re-list after a failed watch, need list"
	localKind = "list/watch of a kind of the local-cluster watcher that the demo's Release does not record (it falls back to GETs without them)"
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
	n := 0
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log line %q: %v", sc.Text(), err)
		}
		if e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted" || e.ResponseStatus == nil {
			continue
		}
		n++
		p := permission{user: e.User.Username, verb: e.Verb}
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

// analysis is hack/promrules' answer for one expression.
type analysis struct {
	Source    string `json:"source"`
	Expr      string `json:"expr"`
	Selectors []struct {
		Metric string   `json:"metric"`
		Labels []string `json:"labels"`
	} `json:"selectors"`
	Grouping []string `json:"grouping"`
}

// targetLabels are the labels Prometheus adds to every scraped series (the Prometheus
// Operator's ServiceMonitor targets); le is every histogram bucket's.
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "service": true, "endpoint": true, "container": true}

// TestMonitoring validates config/monitoring's rules with Prometheus' rule parser and
// checks every metric and label its alerts and dashboard name against what the observer
// and convoy-api expose.
func TestMonitoring(t *testing.T) {
	r := demo(t)
	exposed := map[string]map[string]bool{} // metric → labels
	for _, f := range []string{"convoy-observer.metrics", "convoy-api.metrics"} {
		scraped(t, filepath.Join(r.metricsDir, f), exposed)
	}
	declared(t, filepath.Join(r.root, "internal"), exposed)

	rules := promrules(t, r.root, nil, "rules", filepath.Join(r.root, "config", "monitoring", "prometheusrule.yaml"))
	var exprs []string
	dash, err := os.ReadFile(filepath.Join(r.root, "config", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var titles []string
	// Grafana's variables, as the dashboard defines them, before PromQL parses the query.
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", "convoy-observer", "$api_job", "convoy-api")
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q, _ := json.Marshal(vars.Replace(tg.Expr))
			exprs = append(exprs, string(q))
			titles = append(titles, p.Title)
		}
	}
	if len(exprs) == 0 {
		t.Fatal("dashboard.json has no query")
	}
	queries := promrules(t, r.root, []byte(strings.Join(exprs, "\n")+"\n"), "exprs")
	if len(queries) != len(exprs) {
		t.Fatalf("%d analyses for %d dashboard queries", len(queries), len(exprs))
	}
	for i := range queries {
		queries[i].Source = "dashboard panel " + strconv.Quote(titles[i])
	}
	for _, a := range append(rules, queries...) {
		labels := map[string]bool{}
		for _, s := range a.Selectors {
			have, ok := exposed[s.Metric]
			if !ok {
				t.Errorf("%s: metric %s is exposed by neither convoy-observer nor convoy-api", a.Source, s.Metric)
				continue
			}
			for _, l := range s.Labels {
				if !have[l] && !targetLabels[l] {
					t.Errorf("%s: metric %s has no label %s (it has %v)", a.Source, s.Metric, l, keys(have))
				}
			}
			for l := range have {
				labels[l] = true
			}
		}
		for _, g := range a.Grouping {
			if !labels[g] && !targetLabels[g] {
				t.Errorf("%s: groups by %s, which none of its metrics has", a.Source, g)
			}
		}
	}
	t.Logf("%d alerts and %d dashboard queries checked against %d exposed metrics", len(rules), len(queries), len(exposed))
}

// scraped adds the metric families of a /metrics file to exposed (a histogram also as
// NAME_bucket with le, NAME_sum and NAME_count; a summary with quantile).
func scraped(t *testing.T, file string, exposed map[string]map[string]bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(fams) == 0 {
		t.Fatalf("%s holds no metric", file)
	}
	for name, f := range fams {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		names := []string{name}
		switch f.GetType().String() {
		case "HISTOGRAM":
			names = append(names, name+"_sum", name+"_count")
			withLe := maps(labels, "le")
			merge(exposed, name+"_bucket", withLe)
		case "SUMMARY":
			labels["quantile"] = true
			names = append(names, name+"_sum", name+"_count")
		}
		for _, n := range names {
			merge(exposed, n, labels)
		}
	}
}

// declared adds the metrics that internal/ declares with prometheus.New*(…Opts{Name: …},
// []string{labels…}) to exposed: a vector has no series until its first event (a write
// conflict, a watch fallback), which the scenario may not cause.
func declared(t *testing.T, dir string, exposed map[string]map[string]bool) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "New") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
				return true
			}
			opts, ok := call.Args[0].(*ast.CompositeLit)
			if !ok {
				return true
			}
			name := ""
			for _, el := range opts.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
						if lit, ok := kv.Value.(*ast.BasicLit); ok {
							name, _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
			if name == "" {
				return true
			}
			labels := map[string]bool{}
			if len(call.Args) > 1 {
				if lst, ok := call.Args[1].(*ast.CompositeLit); ok {
					for _, el := range lst.Elts {
						if lit, ok := el.(*ast.BasicLit); ok {
							l, _ := strconv.Unquote(lit.Value)
							labels[l] = true
						}
					}
				}
			}
			merge(exposed, name, labels)
			if strings.Contains(sel.Sel.Name, "Histogram") {
				merge(exposed, name+"_bucket", maps(labels, "le"))
				merge(exposed, name+"_sum", labels)
				merge(exposed, name+"_count", labels)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func merge(exposed map[string]map[string]bool, name string, labels map[string]bool) {
	if exposed[name] == nil {
		exposed[name] = map[string]bool{}
	}
	for l := range labels {
		exposed[name][l] = true
	}
}

func maps(labels map[string]bool, more ...string) map[string]bool {
	out := map[string]bool{}
	for l := range labels {
		out[l] = true
	}
	for _, l := range more {
		out[l] = true
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// promrules runs hack/promrules (Prometheus' parsers, from its own module file) with args and
// stdin, and decodes its JSON lines; a rule or query it refuses fails the test.
func promrules(t *testing.T, root string, stdin []byte, args ...string) []analysis {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "-tags", "promrules", "-modfile", filepath.Join("hack", "promrules", "promrules.mod"), "./hack/promrules"}, args...)...)
	cmd.Dir = root
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/promrules %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("hack/promrules %s: %s", args[0], time.Since(start).Round(time.Second))
	var out []analysis
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var a analysis
		if err := dec.Decode(&a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}
