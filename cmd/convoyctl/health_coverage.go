package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/manifest"
)

// Exit statuses of health coverage besides exitOK, exitCompileError and exitUsage.
const (
	// exitUnjudged: some kind is judged by no selected rule.
	exitUnjudged = 3
	// exitClusterError: the cluster could not be read (health coverage --kubeconfig).
	exitClusterError = exitEndpointError
)

// coverageOptions are the flags of health coverage.
type coverageOptions struct {
	rules, objects, kinds, resources []string
	guess                            bool
	served                           bool
	// fromCluster: a connection flag was given (the cluster's Releases are checked).
	fromCluster bool
}

// newHealthCoverageCommand builds `health coverage`.
func newHealthCoverageCommand(env *cliEnv) *cobra.Command {
	o := &coverageOptions{}
	cmd := &cobra.Command{
		Use:   "coverage (--rules FILE|DIR… (--object FILE|DIR… | --kind APIVERSION/KIND…) | --kubeconfig F [-n NS] [--served] [--rules FILE|DIR…])",
		Short: "List the kinds that no selected health rule judges",
		Long: `List the kinds of objects that no selected health rule judges. An object that no rule
judges is Healthy as soon as it exists, whatever it says: a failing custom resource
passes the gate. A rule judges the objects whose apiVersion and resource its apiVersion
(or pattern) and resources (or "*") match, as the health loop matches them.

From files: the rule sets of --rules (files or directories, as health lint reads them;
every set is selected) against the objects of --object (files or directories of
objects; a ReleaseInventory stands for its entries) and the kinds of --kind
(APIVERSION/KIND, such as apps/v1/Deployment or v1/ConfigMap). The resource of a kind
comes from --resource KIND=plural, the built-in kinds, or --guess-resources, as in
health eval.

From a cluster (any of kubectl's connection flags but -n: --kubeconfig, --context, …): every Release (of -n NAMESPACE, else of all
namespaces) with spec.healthAssessment, its ReleaseInventory's entries and the rule sets
it selects, as the health loop selects them; the rule sets of --rules, when given, are
added to every Release's selection (to see what selecting them would judge). Releases
without spec.healthAssessment judge nothing on purpose and are only counted. --served
adds every resource the cluster serves (discovery; the ones that can be read), judged
against every rule that some Release in scope selects: the kinds that would pass unjudged
if a Release applied them.

The table lists each apiVersion and kind that no rule judges, with its resource, the
number of such objects (OBJECTS) and of Releases (or ReleaseInventory files) that hold
them (RELEASES), the most frequent first; the last line sums up.

Exit status: 0 when every kind is judged, 3 when some kind is judged by no rule, 1 when
a rule set does not compile (the message names the set and rule; from a cluster, the
Releases whose rules do not compile are named and not counted) or the cluster cannot be
read, 2 on a usage error or unreadable input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			o.fromCluster = env.conn.given(cmd)
			return o.run(ctx, env)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.rules, "rules", nil, "file or directory of rule sets (repeatable); from a cluster, added to every Release's selection")
	f.StringArrayVar(&o.objects, "object", nil, "file or directory of objects or ReleaseInventories (repeatable)")
	f.StringArrayVar(&o.kinds, "kind", nil, "APIVERSION/KIND of objects to check, such as apps/v1/Deployment (repeatable)")
	f.StringArrayVar(&o.resources, "resource", nil, "KIND=plural or KIND.GROUP=plural: the resource of a kind (repeatable)")
	f.BoolVar(&o.guess, "guess-resources", false, "guess the resource of a kind that nothing names")
	f.BoolVar(&o.served, "served", false, "also check every resource the cluster serves (with --kubeconfig)")
	return cmd
}

// kindKey is one apiVersion, kind and resource of the report.
type kindKey struct{ apiVersion, kind, resource string }

// coverage counts, per kind, the objects that no rule judges and their holders
// (Releases, inventories). It is pure: the caller says how many rules apply to each. A
// kind is listed when some object of it is judged by no rule (another Release's
// selection may judge the same kind), or when it is a served kind that no rule judges.
type coverage struct {
	kinds    map[kindKey]bool // every kind seen
	objects  map[kindKey]int  // objects that no rule judges
	holders  map[kindKey]map[string]bool
	served   map[kindKey]bool // served kinds that no rule judges
	total    int              // objects seen
	unjudged int              // objects that no rule judges
}

func newCoverage() *coverage {
	return &coverage{kinds: map[kindKey]bool{}, objects: map[kindKey]int{}, holders: map[kindKey]map[string]bool{}, served: map[kindKey]bool{}}
}

// add counts one object of k held by holder ("" for none), judged by rulesApplied rules.
func (c *coverage) add(k kindKey, holder string, rulesApplied int) {
	c.kinds[k] = true
	c.total++
	if rulesApplied > 0 {
		return
	}
	c.unjudged++
	c.objects[k]++
	if holder != "" {
		if c.holders[k] == nil {
			c.holders[k] = map[string]bool{}
		}
		c.holders[k][holder] = true
	}
}

// addServed notes a served kind, judged by rulesApplied rules.
func (c *coverage) addServed(k kindKey, rulesApplied int) {
	c.kinds[k] = true
	if rulesApplied == 0 {
		c.served[k] = true
	}
}

// unjudgedKinds returns the kinds that no rule judges, the most objects first, then by
// apiVersion and kind.
func (c *coverage) unjudgedKinds() []kindKey {
	var out []kindKey
	for k := range c.kinds {
		if c.objects[k] > 0 || c.served[k] {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if c.objects[a] != c.objects[b] {
			return c.objects[a] > c.objects[b]
		}
		if a.apiVersion != b.apiVersion {
			return a.apiVersion < b.apiVersion
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		return a.resource < b.resource
	})
	return out
}

// print writes the table and the summary line; what names the holders ("Releases").
func (c *coverage) print(out io.Writer, what string) error {
	kinds, all := c.unjudgedKinds(), len(c.kinds)
	if len(kinds) == 0 {
		fmt.Fprintf(out, "Every kind is judged by some rule: %d kinds, %d objects.\n", all, c.total)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "APIVERSION\tKIND\tRESOURCE\tOBJECTS\tRELEASES")
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", cell(k.apiVersion), cell(k.kind), cell(k.resource), c.objects[k], len(c.holders[k]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	holders := map[string]bool{}
	for _, hs := range c.holders {
		for h := range hs {
			holders[h] = true
		}
	}
	in := ""
	if len(holders) > 0 {
		in = fmt.Sprintf(" in %d %s", len(holders), what)
	}
	fmt.Fprintf(out, "%d of %d kinds are judged by no rule: %d of %d objects%s pass unjudged.\n",
		len(kinds), all, c.unjudged, c.total, in)
	return nil
}

// run checks the flags, then reads the files or the cluster, and reports.
func (o *coverageOptions) run(ctx context.Context, env *cliEnv) error {
	fromCluster := o.fromCluster
	switch {
	case fromCluster && (len(o.objects) > 0 || len(o.kinds) > 0):
		return usageError(errors.New("--object and --kind check files; --kubeconfig checks a cluster's Releases: use one or the other"))
	case !fromCluster && (env.conn.namespace() != "" || o.served):
		return usageError(errors.New("-n and --served need a cluster: --kubeconfig, --context or another connection flag"))
	case !fromCluster && len(o.rules) == 0:
		return usageError(errors.New("give --rules with --object or --kind, or --kubeconfig (or --context, …) to check a cluster's Releases"))
	case !fromCluster && len(o.objects) == 0 && len(o.kinds) == 0:
		return usageError(errors.New("give --object or --kind: the objects whose kinds to check"))
	}
	var global []extv1alpha1.GlobalHealthRuleSet
	var local []extv1alpha1.HealthRuleSet
	if len(o.rules) > 0 {
		var err error
		if global, local, err = readRuleSetArgs(o.rules); err != nil {
			return inputError(err)
		}
	}
	if fromCluster {
		return o.runCluster(ctx, env, global, local)
	}
	return o.runFiles(env, global, local)
}

// runFiles reports on the objects and kinds of the files.
func (o *coverageOptions) runFiles(env *cliEnv, global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet) error {
	mapper, err := newResourceMapper(o.resources, nil, false, o.guess)
	if err != nil {
		return err
	}
	type item struct {
		key    kindKey
		holder string
	}
	var items []item
	guessed := map[string]bool{} // reported once per kind
	resolve := func(apiVersion, kind, resource, what string) (kindKey, error) {
		if resource == "" {
			m, err := mapper.resourceFor(apiVersion, kind)
			sv, sk := sanitize(apiVersion), sanitize(kind) // for the messages
			if err != nil {
				// Not the mapper's own hint: --kubeconfig here reads a cluster's Releases.
				return kindKey{}, inputError(fmt.Errorf("%s: no resource known for kind %s of %s: name it with --resource %s=PLURAL, "+
					"or --guess-resources to guess it", sanitize(what), sk, sv, sk))
			}
			if m.guessed && !guessed[kind+" "+apiVersion] {
				guessed[kind+" "+apiVersion] = true
				fmt.Fprintf(env.stderr, "%s: guessed resource %q for kind %s of %s; name it with --resource %s=PLURAL\n", env.name, m.resource, sk, sv, sk)
			}
			resource = m.resource
		}
		return kindKey{apiVersion: apiVersion, kind: kind, resource: resource}, nil
	}
	for _, s := range o.kinds {
		i := strings.LastIndex(s, "/")
		if i <= 0 || i == len(s)-1 {
			return usageError(fmt.Errorf("invalid --kind %q: want APIVERSION/KIND, such as apps/v1/Deployment or v1/ConfigMap", s))
		}
		if err := checkKind(s[:i], s[i+1:]); err != nil {
			return usageError(fmt.Errorf("invalid --kind %q: %w", s, err))
		}
		k, err := resolve(s[:i], s[i+1:], "", "--kind "+s)
		if err != nil {
			return err
		}
		items = append(items, item{key: k})
	}
	objs, err := readObjectArgs(o.objects)
	if err != nil {
		return inputError(err)
	}
	for i := range objs {
		obj := &objs[i]
		if obj.GetKind() == "ReleaseInventory" && obj.GetAPIVersion() == v1alpha1.GroupVersion.String() {
			inv := &v1alpha1.ReleaseInventory{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, inv); err != nil {
				return inputError(fmt.Errorf("ReleaseInventory %s: %w", objectName(obj), err))
			}
			for j := range inv.Entries {
				e := &inv.Entries[j]
				k, err := resolve(e.APIVersion(), e.Kind, e.Resource, fmt.Sprintf("ReleaseInventory %s entry %s %s", objectName(obj), e.Kind, e.Name))
				if err != nil {
					return err
				}
				items = append(items, item{key: k, holder: objectName(obj)})
			}
			continue
		}
		k, err := resolve(obj.GetAPIVersion(), obj.GetKind(), "", obj.GetKind()+" "+objectName(obj))
		if err != nil {
			return err
		}
		items = append(items, item{key: k})
	}
	ev, err := compileForCoverage(global, local)
	if err != nil {
		return err
	}
	c := newCoverage()
	for _, it := range items {
		c.add(it.key, it.holder, ev.RulesApplied(it.key.apiVersion, it.key.resource))
	}
	return finishCoverage(env, c, "ReleaseInventories", "", nil)
}

// compileForCoverage compiles the rule sets of the files: a compile error exits 1.
func compileForCoverage(global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet) (*health.Evaluator, error) {
	ev, err := health.NewEvaluator(global, local)
	if err != nil {
		var ce *health.CompileError
		if errors.As(err, &ce) {
			return nil, &exitError{code: exitCompileError, err: fmt.Errorf("rule set does not compile: %w", err)}
		}
		return nil, fmt.Errorf("building the evaluator: %w", err)
	}
	return ev, nil
}

// finishCoverage prints c and note (a last line, unless empty) and returns the exit
// status: errs (Releases that could not be judged) first, then unjudged kinds.
func finishCoverage(env *cliEnv, c *coverage, what, note string, errs []error) error {
	if err := c.print(env.stdout, what); err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	if note != "" {
		fmt.Fprintln(env.stdout, note)
	}
	if len(errs) > 0 {
		return &exitError{code: exitCompileError, err: errors.Join(errs...)}
	}
	if n := len(c.unjudgedKinds()); n > 0 {
		return &exitError{code: exitUnjudged, err: fmt.Errorf("%d kinds are judged by no rule", n)}
	}
	return nil
}

// readObjectArgs reads the objects of --object: files, directories of files, or
// directories with a kustomization. A path without any object is an error.
func readObjectArgs(paths []string) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, path := range paths {
		before := len(out)
		files, kustomization, err := manifestFiles(path)
		if err != nil {
			return nil, fmt.Errorf("reading objects: %w", err)
		}
		if kustomization {
			data, err := kustomizeBuild(path)
			if err != nil {
				return nil, fmt.Errorf("reading objects: %w", err)
			}
			objs, err := manifest.DecodeObjects(bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("reading objects of kustomize build %s: %w", path, err)
			}
			out = append(out, objs...)
		}
		for _, f := range files {
			objs, err := readObjects(f)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		if len(out) == before {
			return nil, fmt.Errorf("reading objects: %s holds no object", path)
		}
	}
	return out, nil
}

// checkKind returns an error unless apiVersion is a version (v1) or GROUP/VERSION with a
// lowercase DNS subdomain for GROUP and a DNS-1035 label for VERSION, and kind is a name
// whose lowercase form is a DNS-1035 label (what the API server requires of a CRD's kind):
// a kind that no API server serves would otherwise be listed as judged by no rule.
func checkKind(apiVersion, kind string) error {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	if (ok && len(validation.IsDNS1123Subdomain(group)) > 0) || len(validation.IsDNS1035Label(version)) > 0 {
		return fmt.Errorf("apiVersion %q is no VERSION or GROUP/VERSION (a lowercase DNS subdomain and a lowercase label, such as apps/v1)", sanitize(apiVersion))
	}
	if len(validation.IsDNS1035Label(strings.ToLower(kind))) > 0 {
		return fmt.Errorf("kind %q is no kind name (letters and digits, starting with a letter, such as Deployment)", sanitize(kind))
	}
	return nil
}
