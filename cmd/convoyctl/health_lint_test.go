package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

// TestHealthLint runs health lint offline: the library and convoy-defaults lint clean
// (notes only), each mistake of health/lint/testdata/bad.yaml is an error line, exit 1.
func TestHealthLint(t *testing.T) {
	t.Parallel()
	library, err := filepath.Glob("../../health/library/*.yaml")
	if err != nil || len(library) == 0 {
		t.Fatalf("no library files: %v", err)
	}
	code, stdout, stderr := runCLI(append([]string{"health", "lint", defaultsFile}, library...)...)
	if code != exitOK || strings.Contains(stdout, "error:") || stderr != "" {
		t.Errorf("library: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	dir := t.TempDir()
	empty, groupless := filepath.Join(dir, "empty.yaml"), filepath.Join(dir, "groupless.yaml")
	if err := os.WriteFile(empty, []byte("---\n# nothing\n---\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(groupless, []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI("health", "lint", "../../health/lint/testdata/bad.yaml")
	if code != exitCompileError || strings.Count(stdout, "error: GlobalHealthRuleSet/bad rule ") != 7 ||
		!strings.Contains(stdout, "undefined field 'readyReplica'") || !strings.Contains(stderr, "7 errors in 1 rule sets") {
		t.Errorf("bad.yaml: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, args := range [][]string{{"health", "lint"}, {"health", "lint", "/nonexistent.yaml"},
		{"health", "lint", defaultsFile, "--schema", defaultsFile}, // not a CRD
		{"health", "lint", defaultsFile, "--schema", t.TempDir()},  // no file
		{"health", "lint", empty},                                  // no rule set: it would lint clean
		{"health", "lint", defaultsFile, "--schema", empty},        // no CRD
		{"health", "lint", defaultsFile, "--schema", groupless},    // a CRD without group and names
	} {
		if code, _, stderr := runCLI(args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr: %s", args, code, exitUsage, stderr)
		}
	}
}

// TestHealthLintWarnings: an optional selection of a field that the kind's schema does
// not declare works (it yields none) and is a warning line, exit 0; a plain selection of
// it fails on every object and is an error, exit 1.
func TestHealthLintWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, expr string) string {
		path := filepath.Join(dir, name)
		doc := "apiVersion: extensions.convoy.kumodo.io/v1alpha1\nkind: GlobalHealthRuleSet\nmetadata: {name: cm}\n" +
			"spec:\n  rules:\n    - apiVersion: v1\n      resources: [configmaps]\n      ruleExpression: " + strconv.Quote(expr) + "\n"
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	optional := write("optional.yaml", "object.?status.?conditions.orValue([]).size() == 0")
	code, stdout, stderr := runCLI("health", "lint", optional)
	want := "warning: GlobalHealthRuleSet/cm rule 0 ruleExpression: v1 configmaps (ConfigMap): object.?status (column 7): " +
		"ConfigMap declares no field 'status': the selection always yields none\n"
	if code != exitOK || stdout != want || stderr != "" {
		t.Errorf("optional selection: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0 and:\n%s", code, stdout, stderr, want)
	}
	plain := write("plain.yaml", "object.status.conditions.size() == 0")
	code, stdout, stderr = runCLI("health", "lint", plain)
	if code != exitCompileError || !strings.HasPrefix(stdout, "error: GlobalHealthRuleSet/cm rule 0 ruleExpression: v1 configmaps (ConfigMap): undefined field 'status'") ||
		!strings.Contains(stderr, "1 errors in 1 rule sets") {
		t.Errorf("plain selection: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestHealthLintTargetNames: a rule whose resources or apiVersion cannot name anything an
// API server serves matches no object, with an exact apiVersion or a pattern, and is an
// error line, exit 1; a singular resource under every group is a note, exit 0.
func TestHealthLintTargetNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		apiVersion, resources string
		code                  int
		want                  string
	}{
		{"apps/*", "[Deployment]", exitCompileError,
			`error: GlobalHealthRuleSet/t rule 0 resources: "Deployment" is a kind, not a resource: resources name plural lowercase resources, such as deployments for Deployment`},
		{"apps/*", "[deployment]", exitCompileError,
			"error: GlobalHealthRuleSet/t rule 0 resources: apps/* deployment matches nothing known: no version of apps has a resource deployment; deployments is one"},
		{"Apps/v1", `["*"]`, exitCompileError, `error: GlobalHealthRuleSet/t rule 0 apiVersion: "Apps/v1": group "Apps" is not an API group name`},
		{"/", `["*"]`, exitCompileError, `error: GlobalHealthRuleSet/t rule 0 apiVersion: "/" is not an apiVersion`},
		{"*", "[deployment]", exitOK, "note: GlobalHealthRuleSet/t rule 0 resources: * deployment: no resource that the schema sources know"},
	} {
		path := filepath.Join(dir, "rules.yaml")
		doc := "apiVersion: extensions.convoy.kumodo.io/v1alpha1\nkind: GlobalHealthRuleSet\nmetadata: {name: t}\n" +
			"spec:\n  rules:\n    - apiVersion: " + strconv.Quote(tc.apiVersion) + "\n      resources: " + tc.resources + "\n      ruleExpression: 'true'\n"
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI("health", "lint", path)
		if code != tc.code || !strings.HasPrefix(stdout, tc.want) {
			t.Errorf("%s %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s\nwant stdout to start with:\n%s", tc.apiVersion, tc.resources, code, tc.code, stdout, stderr, tc.want)
		}
	}
}

// TestHealthLintLibraryDirectory lints the library as kubectl apply -k installs it
// (the directory's kustomization). Offline, its only notes are of third-party CRDs: every
// kind that Kubernetes serves has a built-in schema. With the CRDs of
// health/lint/testdata/crds, it has no error or warning, and a rule goes unchecked only
// when its group has no CustomResourceDefinition there (the projects whose CRDs are not
// vendored yet, listed in that folder's README).
func TestHealthLintLibraryDirectory(t *testing.T) {
	t.Parallel()
	const library, crds = "../../config/rules/library", "../../health/lint/testdata/crds"
	code, stdout, stderr := runCLI("health", "lint", library)
	if code != exitOK || stderr != "" || !strings.Contains(stdout, "note: GlobalHealthRuleSet/library-cert-manager") {
		t.Errorf("offline: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		// note: SET rule I resources: GROUP/VERSION RESOURCE not type-checked: …
		// A wildcard rule on a built-in group (apiregistration.k8s.io/*) is type-checked
		// against the versions Kubernetes serves; its note says that the others are not.
		group, isGroup := noteGroup(line)
		checkedWildcard := strings.Contains(line, " is a wildcard: type-checked against the ")
		// A rule of every apiVersion ("*": legacy-apis, deletion) names no group; its note
		// says which known resources it was type-checked against.
		if !strings.HasPrefix(line, "note: ") || !isGroup && !checkedWildcard || builtinGroups[group] && !checkedWildcard {
			t.Errorf("offline: a finding that is not a note on a third-party CRD: %s", line)
		}
	}
	vendored := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(crds, "*.yaml"))
	for _, crd := range manifesttest.CRDs(t, files...) {
		for _, v := range crd.Spec.Versions {
			vendored[crd.Spec.Group+"/"+v.Name] = true
		}
	}
	code, stdout, stderr = runCLI("health", "lint", library, "--schema", crds)
	if code != exitOK || stderr != "" {
		t.Errorf("with --schema: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		_, rest, _ := strings.Cut(line, "resources: ")
		groupVersion := strings.Fields(rest + " -")[0]
		if !strings.HasPrefix(line, "note: ") || strings.Contains(line, " not type-checked: ") && vendored[groupVersion] {
			t.Errorf("with --schema: a finding on a group version whose CRD is given: %s", line)
		}
	}
}

// builtinGroups are the API groups every API server serves (the core group is ""):
// health lint has a built-in schema for their kinds.
var builtinGroups = map[string]bool{"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true,
	"networking.k8s.io": true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
	"rbac.authorization.k8s.io": true, "storage.k8s.io": true, "scheduling.k8s.io": true,
	"coordination.k8s.io": true, "discovery.k8s.io": true, "node.k8s.io": true, "events.k8s.io": true,
	"admissionregistration.k8s.io": true, "certificates.k8s.io": true, "resource.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true}

// noteGroup returns the API group a lint finding names ("note: SET rule I resources:
// GROUP/VERSION …"); isGroup is false for the core group's "v1".
func noteGroup(line string) (group string, isGroup bool) {
	_, rest, _ := strings.Cut(line, "resources: ")
	group, _, isGroup = strings.Cut(strings.Fields(rest + " -")[0], "/")
	if !isGroup {
		return "", false
	}
	return group, true
}

// TestHealthLintCluster type-checks rules of a CRD against the schema that a real API
// server serves (this project's Release), with --kubeconfig.
func TestHealthLintCluster(t *testing.T) {
	env := controlPlane(t)
	kubeconfig := adminKubeconfig(t, env)
	rules := writeFile(t, "rules.yaml", `apiVersion: extensions.convoy.kumodo.io/v1alpha1
kind: GlobalHealthRuleSet
metadata: {name: releases}
spec:
  rules:
  - apiVersion: convoy.kumodo.io/v1alpha1
    resources: [releases]
    ruleExpression: "has(object.status) && has(object.status.healthSummary) && object.status.healthSummary.total == object.status.healthSummary.healthy"
  - apiVersion: convoy.kumodo.io/v1alpha1
    resources: [releases]
    ruleExpression: "object.spec.clusterRef.nam == 'x'"
  - apiVersion: convoy.kumodo.io/v1alpha1
    resources: [releasez]
    ruleExpression: "true"
  - apiVersion: example.com/v1
    resources: [widgets]
    ruleExpression: "true"
  - apiVersion: convoy.kumodo.io/v1alpha1
    resources: [releases]
    ruleExpression: "has(object.status.healthSummary.total)"
`)
	// The API server publishes a new CRD's schema in /openapi/v3 a moment after the CRD
	// is established: until then, lint notes that it cannot type-check the rule.
	var code int
	var stdout, stderr string
	eventually(t, "the Release schema in /openapi/v3", func() bool {
		code, stdout, stderr = runCLI("health", "lint", "--kubeconfig", kubeconfig, rules)
		return !strings.Contains(stdout, "note:")
	})
	want := []string{
		"error: GlobalHealthRuleSet/releases rule 1 ruleExpression: convoy.kumodo.io/v1alpha1 releases (Release): undefined field 'nam'",
		"error: GlobalHealthRuleSet/releases rule 2 resources: convoy.kumodo.io/v1alpha1 releasez matches nothing known",
		"error: GlobalHealthRuleSet/releases rule 3 resources: example.com/v1 widgets matches nothing known",
		"error: GlobalHealthRuleSet/releases rule 4 ruleExpression: convoy.kumodo.io/v1alpha1 releases (Release): has(object.status.healthSummary.total): object.status.healthSummary may be absent",
	}
	if code != exitCompileError || strings.Count(stdout, "\n") != len(want) {
		t.Errorf("exit %d, want %d and %d lines\nstdout:\n%s\nstderr:\n%s", code, exitCompileError, len(want), stdout, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
}
