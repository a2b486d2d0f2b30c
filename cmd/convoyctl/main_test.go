package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// defaultsFile is the shipped default rule set, in this repository.
const defaultsFile = "../../health/convoy-defaults.yaml"

// case18a is the fixture of a Deployment whose counts must stay integers.
const case18a = "../../testdata/objects/18a-cel-int-vs-double.yaml"

// writeFile writes content to a new file in a test's temporary folder.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runCLI runs convoyctl and returns its exit status, stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// assertRun checks exit status, exact stdout and a fragment of stderr.
func assertRun(t *testing.T, args []string, wantCode int, wantStdout, wantStderr string) {
	t.Helper()
	code, stdout, stderr := runCLI(args...)
	if code != wantCode {
		t.Errorf("exit %d, want %d; stderr: %s", code, wantCode, stderr)
	}
	if stdout != wantStdout {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, wantStdout)
	}
	if !strings.Contains(stderr, wantStderr) {
		t.Errorf("stderr %q does not contain %q", stderr, wantStderr)
	}
	if wantCode == 0 && stderr != "" {
		t.Errorf("unexpected stderr %q", stderr)
	}
}

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, updatedReplicas: 1, availableReplicas: 1}
`

const podsListJSON = `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "demo"}, "status": {"phase": "Running"}},
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b", "namespace": "demo"}, "status": {"phase": "Pending"}}
]}`

func TestHealthEval(t *testing.T) {
	t.Parallel()
	deploy := writeFile(t, "deploy.yaml", deploymentYAML+"---\napiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: demo}\n")
	pods := writeFile(t, "pods.json", podsListJSON)
	local := writeFile(t, "local.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: HealthRuleSet
metadata: {name: services, namespace: demo}
spec:
  rules:
  - apiVersion: v1
    resources: [services]
    ruleExpression: "has(object.status)"
`)
	// The replicas rule shows integers stay integers: int arithmetic and string().
	ints := writeFile(t, "ints.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: GlobalHealthRuleSet
metadata: {name: ints}
spec:
  rules:
  - apiVersion: apps/v1
    resources: [deployments]
    ruleExpression: "type(object.spec.replicas) == int && object.spec.replicas + 1 == 4"
  - apiVersion: apps/v1
    resources: [deployments]
    ruleExpression: "false"
    messageExpression: "'replicas ' + string(object.spec.replicas) + ', doubled ' + string(object.spec.replicas * 2)"
`)
	const (
		// decidedBy names the deciding rule: convoy-defaults' rule 0 (Deployments) or 3 (Pods).
		byDefaults0 = `"decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"convoy-defaults","rule":0,"cause":"RuleFailed"}`
		byDefaults3 = `"decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"convoy-defaults","rule":3,"cause":"RuleFailed"}`
		web         = `{"apiVersion":"apps/v1","kind":"Deployment","namespace":"demo","name":"web","state":"%s","message":"1/3 available, 1 updated",` + byDefaults0 + `,"rulesApplied":1}` + "\n"
		podA        = `{"apiVersion":"v1","kind":"Pod","namespace":"demo","name":"a","state":"Healthy","message":"","rulesApplied":1}` + "\n"
		podB        = `{"apiVersion":"v1","kind":"Pod","namespace":"demo","name":"b","state":"%s","message":"phase: Pending",` + byDefaults3 + `,"rulesApplied":1}` + "\n"
		// Degraded: the deadline, not the failing rule alone, decided it.
		podBDegraded = `{"apiVersion":"v1","kind":"Pod","namespace":"demo","name":"b","state":"Degraded","message":"phase: Pending",` +
			`"decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"convoy-defaults","rule":3,"cause":"DeadlinePassed"},"rulesApplied":1}` + "\n"
		svc      = `{"apiVersion":"v1","kind":"Service","namespace":"demo","name":"svc","state":"Healthy","message":"","rulesApplied":0}` + "\n"
		svcLocal = `{"apiVersion":"v1","kind":"Service","namespace":"demo","name":"svc","state":"Progressing","message":"health rule 0 of HealthRuleSet/services not satisfied",` +
			`"decidedBy":{"kind":"HealthRuleSet","namespace":"demo","name":"services","rule":0,"cause":"RuleFailed"},"rulesApplied":1}` + "\n"
	)
	sprintf := func(format, state string) string { return strings.Replace(format, "%s", state, 1) }
	cases := []struct {
		name   string
		args   []string
		stdout string
	}{
		{name: "YAML, multi-document; JSON List; no deadline",
			args:   []string{"--object", deploy, "--object", pods, "--now", "2026-01-01T00:00:00Z"},
			stdout: sprintf(web, "Progressing") + svc + podA + sprintf(podB, "Progressing")},
		{name: "deadline passed exactly",
			args:   []string{"--object", pods, "--deadline", "5m", "--first-unhealthy", "2026-01-01T00:00:00Z", "--now", "2026-01-01T00:05:00Z"},
			stdout: podA + podBDegraded},
		{name: "deadline not yet passed",
			args:   []string{"--object", pods, "--deadline", "5m", "--first-unhealthy", "2026-01-01T00:00:00Z", "--now", "2026-01-01T00:04:59.999Z"},
			stdout: podA + sprintf(podB, "Progressing")},
		{name: "deadline without anchor: the failure starts now",
			args:   []string{"--object", pods, "--deadline", "1s"},
			stdout: podA + sprintf(podB, "Progressing")},
		{name: "local rule set from a second --rules file",
			args:   []string{"--rules", local, "--object", deploy},
			stdout: sprintf(web, "Progressing") + svcLocal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"health", "eval", "--rules", defaultsFile}, tc.args...)
			assertRun(t, args, 0, tc.stdout, "")
		})
	}
	t.Run("wildcard rules and rulesApplied", func(t *testing.T) {
		t.Parallel()
		wild := writeFile(t, "wild.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: GlobalHealthRuleSet
metadata: {name: wild}
spec:
  rules:
  - apiVersion: "*"
    resources: [services]
    ruleExpression: "has(object.spec)"
    messageExpression: "'no spec'"
  - apiVersion: "apps/*"
    resources: ["*"]
    ruleExpression: "true"
`)
		assertRun(t, []string{"health", "eval", "--rules", defaultsFile, "--rules", wild, "--object", deploy, "--now", "2026-01-01T00:00:00Z"}, 0,
			sprintf(strings.Replace(web, `"rulesApplied":1`, `"rulesApplied":2`, 1), "Progressing")+
				`{"apiVersion":"v1","kind":"Service","namespace":"demo","name":"svc","state":"Progressing","message":"no spec",`+
				`"decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"wild","rule":0,"cause":"RuleFailed"},"rulesApplied":1}`+"\n", "")
	})
	t.Run("integers stay int64 (case 18a)", func(t *testing.T) {
		t.Parallel()
		assertRun(t, []string{"health", "eval", "--rules", ints, "--object", case18a}, 0,
			`{"apiVersion":"apps/v1","kind":"Deployment","namespace":"demo","name":"app1-18a","state":"Progressing","message":"replicas 3, doubled 6",`+
				`"decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"ints","rule":1,"cause":"RuleFailed"},"rulesApplied":2}`+"\n", "")
	})
}

func TestHealthEvalErrors(t *testing.T) {
	t.Parallel()
	obj := writeFile(t, "obj.yaml", deploymentYAML)
	broken := writeFile(t, "broken.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: GlobalHealthRuleSet
metadata: {name: broken}
spec:
  rules:
  - {apiVersion: v1, resources: [pods], ruleExpression: "true"}
  - {apiVersion: v1, resources: [pods], ruleExpression: "object.status.phase ==", messageExpression: "'x'"}
`)
	// The review's rule: 1,260 comparisons, 16,378 characters, 6,299 nodes.
	tooLarge := writeFile(t, "large.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: HealthRuleSet
metadata: {name: large, namespace: tenant}
spec:
  rules:
  - {apiVersion: v1, resources: [pods], ruleExpression: "`+strings.Repeat("object.a==1&&", 1259)+`object.a==1"}
`)
	unknownKind := writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
	notYAML := writeFile(t, "bad.yaml", "kind: [\n")
	noKind := writeFile(t, "nokind.yaml", "apiVersion: v1\nmetadata: {name: c}\n")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	eval := func(args ...string) []string { return append([]string{"health", "eval"}, args...) }

	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"rule set does not compile", eval("--rules", broken, "--object", obj), 1,
			`GlobalHealthRuleSet/broken rule 1: ruleExpression "object.status.phase ==": ERROR`},
		{"rule too large to compile", eval("--rules", tooLarge, "--object", obj), 1,
			`HealthRuleSet/tenant/large rule 0: ruleExpression "object.a==1&&object.a==1&&object.a==1&&object.a==1&&object.a==1&&object.a==1&&object.a==1&&object.a…": ` +
				"the expression has 6299 nodes, more than the limit of 1000 nodes per expression (type-checking costs grow with the square of the size): split it into several rules"},
		{"missing --rules", eval("--object", obj), 2, `give --rules and --object (or --release NAMESPACE/NAME)`},
		{"missing --object", eval("--rules", defaultsFile), 2, `give --rules and --object (or --release NAMESPACE/NAME)`},
		{"unknown flag", eval("--rules", defaultsFile, "--object", obj, "--colour"), 2, "unknown flag: --colour"},
		{"positional argument", eval("--rules", defaultsFile, "--object", obj, "extra"), 2, `unknown command "extra"`},
		{"unknown subcommand", []string{"health", "evaluate"}, 2, `unknown command "evaluate" for "convoyctl health"`},
		{"unknown command", []string{"release-status"}, 2, `unknown command "release-status" for "convoyctl"`},
		{"unreadable rules", eval("--rules", missing, "--object", obj), 2, "reading rules: open " + missing},
		{"unreadable object", eval("--rules", defaultsFile, "--object", missing), 2, "reading objects: open " + missing},
		{"rules of an unknown kind", eval("--rules", unknownKind, "--object", obj), 2, `unknown kind "ConfigMap" of apiVersion "v1"`},
		{"objects not YAML", eval("--rules", defaultsFile, "--object", notYAML), 2, "reading objects " + notYAML + ": document 1"},
		{"object without kind", eval("--rules", defaultsFile, "--object", noKind), 2, "object has no kind"},
		{"-n on files", eval("--rules", defaultsFile, "--object", obj, "-n", "prod"), 2, "-n does not apply"},
		{"-n with --release", eval("--release", "prod/web", "-n", "prod"), 2, "-n does not apply"},
		{"bad --deadline", eval("--rules", defaultsFile, "--object", obj, "--deadline", "5 minutes"), 2, `invalid --deadline "5 minutes"`},
		{"negative --deadline", eval("--rules", defaultsFile, "--object", obj, "--deadline", "-5m"), 2, `invalid --deadline "-5m": must not be negative`},
		{"bad --now", eval("--rules", defaultsFile, "--object", obj, "--now", "yesterday"), 2, `invalid --now "yesterday"`},
		{"bad --first-unhealthy", eval("--rules", defaultsFile, "--object", obj, "--first-unhealthy", "2026-01-01"), 2, `invalid --first-unhealthy "2026-01-01"`},
		// Unreadable input wins over a compile error: nothing is compiled before all is read.
		{"unreadable object and a compile error", eval("--rules", broken, "--object", missing), 2, "reading objects"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assertRun(t, tc.args, tc.code, "", tc.stderr)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCLI("health", "eval", "--help")
	if code != 0 || !strings.Contains(stdout, "--first-unhealthy") || !strings.Contains(stdout, "Exit status") {
		t.Errorf("exit %d, help:\n%s", code, stdout)
	}
}

func TestGuessResource(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{
		"Deployment": "deployments", "Ingress": "ingresses", "NetworkPolicy": "networkpolicies",
		"Gateway": "gateways", "StorageClass": "storageclasses", "Endpoints": "endpoints",
		"HelmRelease": "helmreleases", "Proxy": "proxies", "Key": "keys", "Mesh": "meshes", "Policy": "policies", "Status": "statuses",
	} {
		if got := guessResource(kind); got != want {
			t.Errorf("guessResource(%q) = %q, want %q", kind, got, want)
		}
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("--version exited %d: %s", code, stderr.String())
	}
	if out := stdout.String(); !strings.HasPrefix(out, "convoyctl ") || !strings.Contains(out, "(commit ") || strings.Count(out, "\n") != 1 {
		t.Errorf("--version printed %q, want one line \"convoyctl VERSION (commit …)\"", out)
	}
}

// TestHealthEvalCustomResourceNamedList: a custom resource whose kind ends in List and
// that has items of its own is evaluated as the one object it is (it was read as a list
// of nameless phantom objects, which passed), and an object without metadata.name is
// evaluated with a warning that says so.
func TestHealthEvalCustomResourceNamedList(t *testing.T) {
	t.Parallel()
	rules := writeFile(t, "rules.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: GlobalHealthRuleSet
metadata: {name: allow}
spec:
  rules:
  - {apiVersion: ex.io/v1, resources: [ipallowlists], ruleExpression: "object.status.ready", messageExpression: "'not ready'"}
`)
	obj := writeFile(t, "allow.yaml", `apiVersion: ex.io/v1
kind: IPAllowList
metadata: {name: x}
items: [{cidr: 10.0.0.0/8}, {cidr: 10.1.0.0/16}]
status: {ready: false}
`)
	const want = `{"apiVersion":"ex.io/v1","kind":"IPAllowList","namespace":"","name":"x","state":"Progressing","message":"not ready",` +
		`"decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"allow","rule":0,"cause":"RuleFailed"},"rulesApplied":1}` + "\n"
	assertRun(t, []string{"health", "eval", "--rules", rules, "--object", obj, "--resource", "IPAllowList=ipallowlists"}, exitOK, want, "")
	// Guessed, its resource is the one the kind names.
	if code, stdout, stderr := runCLI("health", "eval", "--rules", rules, "--object", obj, "--guess-resources"); code != exitOK ||
		stdout != strings.Replace(want, `,"rulesApplied"`, `,"resourceGuessed":"ipallowlists","rulesApplied"`, 1) {
		t.Errorf("--guess-resources: exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	nameless := writeFile(t, "nameless.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: v1\nkind: ConfigMap\ndata: {}\n")
	code, stdout, stderr := runCLI("health", "eval", "--rules", rules, "--object", nameless)
	if code != exitOK || strings.Count(stdout, "\n") != 2 ||
		stderr != "convoyctl: warning: object 2 of "+nameless+" (ConfigMap of v1) has no metadata.name, which a live object always has: "+
			"evaluated as given, its line has an empty name\n" {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestHealthEvalDiagnosis: a failing Deployment whose Pods are among the objects gets the
// diagnosis of its newest ReplicaSet's Pod (not the older one's), and with --fail-fast a
// terminal one makes it Degraded, cause FailedFast; a Healthy line has none.
func TestHealthEvalDiagnosis(t *testing.T) {
	t.Parallel()
	objects := filepath.Join("..", "..", "testdata", "diagnosis", "crashloop.yaml")
	const diag = `"diagnosis":"Pod demo/web-7b9c-fghij: container app waiting: CrashLoopBackOff: back-off 1m20s restarting failed container=app, 4 restarts; last terminated: Error (exit code 1)"`
	web := func(state, cause string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","namespace":"demo","name":"web","state":"` + state + `","message":"1/1 available, 1 updated",` +
			`"decidedBy":{"kind":"GlobalHealthRuleSet","namespace":"","name":"convoy-defaults","rule":0,"cause":"` + cause + `"},"rulesApplied":1,` + diag + "}\n"
	}
	for _, tc := range []struct {
		args         []string
		state, cause string
	}{{nil, "Progressing", "RuleFailed"}, {[]string{"--fail-fast"}, "Degraded", "FailedFast"}} {
		code, stdout, stderr := runCLI(append([]string{"health", "eval", "--rules", defaultsFile, "--object", objects}, tc.args...)...)
		first, rest, _ := strings.Cut(stdout, "\n")
		if code != 0 || first+"\n" != web(tc.state, tc.cause) || strings.Contains(rest, "diagnosis") {
			t.Errorf("%v: exit %d, stderr %q\ngot  %s\nwant %s\nrest %s", tc.args, code, stderr, first, web(tc.state, tc.cause), rest)
		}
	}
}

// TestBadRequestTimeout: a --request-timeout that is no duration is a usage error (exit
// 2) for every command, said before anything is read, not an endpoint error.
func TestBadRequestTimeout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"release", "status", "--server", "https://127.0.0.1:1", "--request-timeout", "bogus", "-n", "default", "r"},
		{"release", "wait", "--server", "https://127.0.0.1:1", "--request-timeout", "5 minutes", "-n", "default", "r"},
		{"health", "eval", "--rules", defaultsFile, "--object", defaultsFile, "--request-timeout", "soon"},
		{"health", "lint", defaultsFile, "--request-timeout", "-5s"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			t.Parallel()
			assertRun(t, args, exitUsage, "", "invalid --request-timeout")
		})
	}
}
