package main

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

// testFile is one file of health test cases (docs/rules.md, "Testing rules").
type testFile struct {
	// Rules are the files of rule sets that every case is evaluated with, relative to
	// the test file; every set in them is selected.
	Rules []string `json:"rules"`
	// Deadline, FirstUnhealthy and Now are health eval's --deadline, --first-unhealthy and
	// --now for every case (a case may set its own firstUnhealthy).
	Deadline       string `json:"deadline,omitempty"`
	FirstUnhealthy string `json:"firstUnhealthy,omitempty"`
	Now            string `json:"now,omitempty"`
	// Resources names the resource of kinds that Kubernetes does not build in: kind (or
	// KIND.GROUP) → plural.
	Resources map[string]string `json:"resources,omitempty"`
	Cases     []testCase        `json:"cases"`
}

// testCase is one object and what the rules must say of it.
type testCase struct {
	Name string `json:"name"`
	// Object is the file of the object (exactly one), relative to the test file.
	Object         string `json:"object"`
	FirstUnhealthy string `json:"firstUnhealthy,omitempty"`
	// State is the expected state; Message the expected message exactly, or
	// MessageMatches a regular expression it must match (at most one of the two).
	State          v1alpha1.HealthState `json:"state"`
	Message        *string              `json:"message,omitempty"`
	MessageMatches string               `json:"messageMatches,omitempty"`
	// DecidedBy, when set, is the rule that must decide: its set's kind, namespace and
	// name, the rule's index and the cause; a field left empty is not checked (rule is
	// always checked when decidedBy is given).
	DecidedBy *health.Decider `json:"decidedBy,omitempty"`
}

// testResult is the outcome of one case.
type testResult struct {
	file, name string
	failure    string // "" when it passed
}

type testOptions struct {
	junit string
}

// newHealthTestCommand builds `health test`.
func newHealthTestCommand(env *cliEnv) *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test PATH... [--junit FILE]",
		Short: "Run test cases of health rules: objects and the state, message and rule they must get",
		Long: `Run test cases of health rules, each an object and what the rules must say of it, evaluated
exactly as the health loop and health eval evaluate. A PATH is a test file, or a directory
whose files ending in .test.yaml (at any depth) are test files. A test file (YAML or JSON):

  rules: [../rules/web.yaml]          # rule files, relative to the test file
  deadline: 10m                       # optional, as health eval's --deadline
  now: "2026-01-01T00:10:00Z"         # optional, default: the current time
  firstUnhealthy: "2026-01-01T00:00:00Z"  # optional, for every case
  resources: {Widget: widgets}        # optional: the resource of a kind Kubernetes lacks
  cases:
    - name: crash-looping
      object: objects/web-crash.yaml  # one object, relative to the test file
      state: Degraded
      message: "container main: CrashLoopBackOff"   # or messageMatches: a regular expression
      decidedBy: {kind: GlobalHealthRuleSet, name: companion-workloads, rule: 0, cause: Failed}

It prints one line per case, PASS or FAIL (with what it got and what was wanted), then a
summary; with --junit it also writes a JUnit XML report for a CI system.

Exit status: 0 when every case passed, 1 when a case failed or a rule set does not compile,
2 on a usage error or an unreadable or invalid test file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(env, args)
		},
	}
	cmd.Flags().StringVar(&o.junit, "junit", "", "also write a JUnit XML report to this file")
	return cmd
}

func (o *testOptions) run(env *cliEnv, paths []string) error {
	files, err := testFiles(paths)
	if err != nil {
		return inputError(err)
	}
	var results []testResult
	for _, f := range files {
		rs, err := runTestFile(env, f)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	failed := 0
	for _, r := range results {
		if r.failure == "" {
			fmt.Fprintf(env.stdout, "PASS %s: %s\n", r.file, sanitize(r.name))
			continue
		}
		failed++
		fmt.Fprintf(env.stdout, "FAIL %s: %s: %s\n", r.file, sanitize(r.name), sanitizeLines(r.failure))
	}
	fmt.Fprintf(env.stdout, "%d cases in %d files: %d passed, %d failed\n", len(results), len(files), len(results)-failed, failed)
	if o.junit != "" {
		if err := writeJUnit(o.junit, results); err != nil {
			return fmt.Errorf("writing %s: %w", o.junit, err)
		}
	}
	if failed > 0 {
		return &exitError{code: exitCompileError, err: fmt.Errorf("%d of %d cases failed", failed, len(results))}
	}
	return nil
}

// testFiles expands paths: a file as it is, a directory to its *.test.yaml files, sorted.
func testFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".test.yaml") {
				found = append(found, path)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s holds no *.test.yaml file", p)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

// runTestFile reads one test file and its inputs (exit 2 on any problem), compiles its
// rules (exit 1) and runs its cases in order.
func runTestFile(env *cliEnv, path string) ([]testResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, inputError(err)
	}
	var tf testFile
	if err := yaml.UnmarshalStrict(data, &tf); err != nil {
		return nil, inputError(fmt.Errorf("%s: %w", path, err))
	}
	if len(tf.Rules) == 0 || len(tf.Cases) == 0 {
		return nil, inputError(fmt.Errorf("%s: a test file needs rules and cases", path))
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	deadline, err := parseDeadline(tf.Deadline)
	if err != nil {
		return nil, inputError(fmt.Errorf("%s: invalid deadline %w", path, err))
	}
	parseTime := func(what, v string) (*time.Time, error) {
		t, err := parseInstant(v)
		if err != nil {
			return nil, inputError(fmt.Errorf("%s: invalid %s %w", path, what, err))
		}
		return t, nil
	}
	now := env.now()
	if t, err := parseTime("now", tf.Now); err != nil {
		return nil, err
	} else if t != nil {
		now = *t
	}
	anchor, err := parseTime("firstUnhealthy", tf.FirstUnhealthy)
	if err != nil {
		return nil, err
	}
	var global []extv1alpha1.GlobalHealthRuleSet
	var local []extv1alpha1.HealthRuleSet
	for _, r := range tf.Rules {
		g, l, err := readRuleSets(rel(r))
		if err != nil {
			return nil, inputError(fmt.Errorf("%s: %w", path, err))
		}
		global, local = append(global, g...), append(local, l...)
	}
	var specs []string
	for kind, plural := range tf.Resources {
		specs = append(specs, kind+"="+plural)
	}
	mapper, err := newResourceMapper(specs, nil, false, false)
	if err != nil {
		return nil, err
	}
	ev, err := health.NewEvaluator(global, local)
	if err != nil {
		var ce *health.CompileError
		if errors.As(err, &ce) {
			return nil, &exitError{code: exitCompileError, err: fmt.Errorf("%s: rule set does not compile: %w", path, err)}
		}
		return nil, fmt.Errorf("building the evaluator: %w", err)
	}
	var results []testResult
	for i, c := range tf.Cases {
		name := c.Name
		if name == "" {
			name = fmt.Sprintf("case %d", i)
		}
		if c.Object == "" || c.State == "" || (c.Message != nil && c.MessageMatches != "") {
			return nil, inputError(fmt.Errorf("%s: %s: a case needs an object and a state, and at most one of message and messageMatches", path, name))
		}
		var re *regexp.Regexp
		if c.MessageMatches != "" {
			if re, err = regexp.Compile(c.MessageMatches); err != nil {
				return nil, inputError(fmt.Errorf("%s: %s: invalid messageMatches: %w", path, name, err))
			}
		}
		objs, err := readObjects(rel(c.Object))
		if err != nil || len(objs) != 1 {
			if err == nil {
				err = fmt.Errorf("%s holds %d objects, want 1", c.Object, len(objs))
			}
			return nil, inputError(fmt.Errorf("%s: %s: %w", path, name, err))
		}
		caseAnchor := anchor
		if t, err := parseTime("firstUnhealthy", c.FirstUnhealthy); err != nil {
			return nil, err
		} else if t != nil {
			caseAnchor = t
		}
		m, err := mapper.resourceFor(objs[0].GetAPIVersion(), objs[0].GetKind())
		if err != nil {
			return nil, inputError(fmt.Errorf("%s: %s: %w (name it under resources:)", path, name, err))
		}
		line, err := evaluate(context.Background(), ev, &objs[0], m, judging{anchor: caseAnchor, deadline: deadline, now: now})
		if err != nil {
			return nil, err
		}
		results = append(results, testResult{file: path, name: name, failure: c.check(line, re)})
	}
	return results, nil
}

// check says how line falls short of the case, "" when it does not.
func (c *testCase) check(line evalLine, re *regexp.Regexp) string {
	var miss []string
	if line.State != c.State {
		miss = append(miss, fmt.Sprintf("state %s, want %s", line.State, c.State))
	}
	switch {
	case c.Message != nil && line.Message != *c.Message:
		miss = append(miss, fmt.Sprintf("message %q, want %q", line.Message, *c.Message))
	case re != nil && !re.MatchString(line.Message):
		miss = append(miss, fmt.Sprintf("message %q, want a match of %q", line.Message, re.String()))
	}
	if w := c.DecidedBy; w != nil {
		g := line.DecidedBy
		if g == nil || (w.Kind != "" && g.Kind != w.Kind) || (w.Namespace != "" && g.Namespace != w.Namespace) ||
			(w.Name != "" && g.Name != w.Name) || g.Rule != w.Rule || (w.Cause != "" && g.Cause != w.Cause) {
			miss = append(miss, fmt.Sprintf("decided by %s, want %s", deciderText(g), deciderText(w)))
		}
	}
	return strings.Join(miss, "; ")
}

func deciderText(d *health.Decider) string {
	if d == nil {
		return "no rule"
	}
	set := d.Kind + "/" + d.Name
	if d.Namespace != "" {
		set = d.Kind + "/" + d.Namespace + "/" + d.Name
	}
	return fmt.Sprintf("rule %d of %s (%s)", d.Rule, set, d.Cause)
}

// JUnit XML, as CI systems read it: one testsuite per test file, one testcase per case.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
}

func writeJUnit(path string, results []testResult) error {
	var out junitSuites
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.file]
		if !ok {
			i = len(out.Suites)
			index[r.file] = i
			out.Suites = append(out.Suites, junitSuite{Name: r.file})
		}
		s := &out.Suites[i]
		jc := junitCase{Name: r.name, Classname: r.file}
		if r.failure != "" {
			jc.Failure = &junitFailure{Message: r.failure}
			s.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, jc)
	}
	data, err := xml.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(data, '\n')...), 0o644)
}
