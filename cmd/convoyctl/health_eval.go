package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/diagnosis"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// evalOptions are the flags of health eval.
type evalOptions struct {
	rules          []string
	objects        []string
	deadline       string
	firstUnhealthy string
	now            string
	resources      []string
	guess          bool
	failFast       bool
	// release and serviceAccount are --release and the read identity it assumes.
	release, serviceAccount string
	// cluster: a connection flag was given (discovery, or --release's management cluster).
	cluster bool
}

// evalLine is one line of output. The field order is fixed (docs/design.md, "Command line").
type evalLine struct {
	APIVersion string               `json:"apiVersion"`
	Kind       string               `json:"kind"`
	Namespace  string               `json:"namespace"`
	Name       string               `json:"name"`
	State      v1alpha1.HealthState `json:"state"`
	Message    string               `json:"message"`
	// DecidedBy names the rule that decided a Progressing, Degraded or Unknown state
	// and why: RuleFailed, DeadlinePassed, Failed or EvaluationError (health.Explain; added
	// after docs/design.md, "Command line", as in /health; absent when no rule decided).
	DecidedBy *health.Decider `json:"decidedBy,omitempty"`
	// ResourceGuessed is the resource guessed for the object's kind with
	// --guess-resources (absent when the resource was known).
	ResourceGuessed string `json:"resourceGuessed,omitempty"`
	// RulesApplied is the number of rules whose apiVersion (or apiVersion pattern) and
	// resources (or "*") match the object, so that a Healthy line says whether anything
	// judged it (0: nothing did).
	RulesApplied int `json:"rulesApplied"`
	// Diagnosis is why a failing workload fails, from its current Pods among the given
	// objects (package diagnosis, as the loop records it); absent when there is none.
	Diagnosis string `json:"diagnosis,omitempty"`
}

// newHealthEvalCommand builds `health eval` (docs/design.md, "Command line").
func newHealthEvalCommand(env *cliEnv) *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval --rules FILE [--rules FILE…] --object FILE [--object FILE…] [--deadline D] [--fail-fast] [--first-unhealthy T] [--now T] [--resource KIND=plural…] [--kubeconfig F] [--guess-resources] | eval --release NAMESPACE/NAME [--rules FILE…] [--kubeconfig F] [--context C]",
		Short: "Evaluate health rule sets against objects read from files",
		Long: `Evaluate health rule sets against objects, exactly as the health loop does, and print
one JSON object per line: {"apiVersion","kind","namespace","name","state","message"}, plus
"decidedBy" ({"kind","namespace","name","rule","cause"}: the rule set and 0-based rule index
that decided a non-Healthy state, cause RuleFailed (Progressing), DeadlinePassed (a failing
rule, Degraded because --deadline passed), Failed (a terminal failure, Degraded at once),
FailedFast (with --fail-fast: a terminal diagnosis, Degraded at once) or EvaluationError
(Unknown)) when a rule decided,
and "rulesApplied": the number of rules that match the object's apiVersion and resource,
less the wildcard rules that pass it by its apiVersion alone without reading it (0 on a
Healthy line means that no rule judged the object), and "diagnosis" for a failing
Deployment, StatefulSet, DaemonSet, ReplicaSet or Job whose current Pods (found through
owner references among the given objects, as the loop finds them on the target) show why:
the Pod and its scheduling failure, container waiting reason, last termination or failing
readiness. With --fail-fast a terminal diagnosis makes the workload Degraded (cause
FailedFast), as spec.healthAssessment.failFast does.

Rule files hold GlobalHealthRuleSets and HealthRuleSets (YAML or JSON, one or more
documents, or a List); every set in them is selected. Object files hold Kubernetes objects
(YAML or JSON, one or more documents, or a List); integers stay integers, as on live
objects. A document is a list only when it is shaped like one: kind List, or kind <X>List
with items and nothing but apiVersion, kind, a list's metadata (no name) and items; a
custom resource whose kind ends in List and that has a name or other fields is the object
it is. An object without metadata.name is evaluated, with a warning on stderr. A failing object is Progressing, or Degraded once --deadline has passed since
--first-unhealthy (which defaults to --now, so a failure starts its clock now).

Rules match an object by its apiVersion and its resource (plural, lowercase), which the
loop reads from the inventory; a rule's apiVersion may be a pattern ("*", "GROUP/*",
"*/VERSION", "*.SUFFIX/VERSION", "*.SUFFIX/*") and its resources may hold "*". Here the resource of each kind comes from --resource
KIND=plural (or KIND.GROUP=plural; repeatable), then from the cluster's discovery when
--kubeconfig is given, then from the built-in kinds of Kubernetes. A kind that none of them
knows is an error (exit 2); with --guess-resources its resource is guessed from the kind
instead, reported on stderr and as "resourceGuessed" in its line.

With --release NAMESPACE/NAME it is a dry run against a live Release: it reads the Release,
its ReleaseInventory and the rule sets the Release selects from the cluster of --kubeconfig
(and --context), adds every set of the --rules files (candidates; --rules is optional here),
reads each recorded entry's object live from the Release's Cluster as the observer reaches
it (the Cluster's kubeconfig Secret, or this cluster; as the Cluster's read identity, so the
caller needs to read that Secret and to impersonate that ServiceAccount), and prints one
line per entry, in the inventory's order: the line above for the state the rules give now
(with the entry's firstUnhealthy, the Release's deadline and failFast), then "recorded":
{"state","message","decidedBy","diagnosis"} as the observer last wrote them. It writes
nothing. Exit 1 also when the Release, its inventory or its Cluster cannot be read.

SIGINT or SIGTERM stops the evaluation at once, even inside a rule: the lines printed
are the objects evaluated before, and a message on stderr says how many of them.

Exit status: 0 when every object was evaluated (whatever its state), 1 when a rule set
does not compile, 2 on a usage error or unreadable input, 130 when interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.cluster = env.conn.given(cmd)
			return o.run(cmd.Context(), env)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.rules, "rules", nil, "file of rule sets (repeatable)")
	f.StringArrayVar(&o.objects, "object", nil, "file of objects (repeatable)")
	f.BoolVar(&o.failFast, "fail-fast", false, "spec.healthAssessment.failFast: a failing workload whose diagnosis (from its Pods among the objects) is terminal is Degraded at once, cause FailedFast")
	f.StringVar(&o.deadline, "deadline", "", "spec.healthAssessment.deadline, a Go duration such as 5m (default: no deadline)")
	f.StringVar(&o.firstUnhealthy, "first-unhealthy", "", "firstUnhealthy anchor of every object, RFC 3339 (default: unset, so a failure starts its clock at --now)")
	f.StringVar(&o.now, "now", "", "time of the evaluation, RFC 3339 (default: the current time)")
	f.StringArrayVar(&o.resources, "resource", nil, "KIND=plural or KIND.GROUP=plural: the resource of a kind (repeatable)")
	f.BoolVar(&o.guess, "guess-resources", false, "guess the resource of a kind that nothing names, and report the guess")
	f.StringVar(&o.release, "release", "", "NAMESPACE/NAME: evaluate the Release's recorded objects, read live, with the rule sets it selects and the --rules files (read-only)")
	f.StringVar(&o.serviceAccount, "default-service-account", clustercache.DefaultServiceAccount,
		"with --release: the observer's --default-service-account, the read identity of a Cluster that names none")
	return cmd
}

// run reads every input first (exit 2 on any problem), then compiles the rules (exit 1),
// then evaluates and prints each object in file order.
func (o *evalOptions) run(ctx context.Context, env *cliEnv) error {
	switch {
	case o.release != "" && (len(o.objects) > 0 || o.deadline != "" || o.firstUnhealthy != "" || o.failFast || len(o.resources) > 0 || o.guess):
		return usageError(errors.New("--release reads the objects, deadline, failFast and firstUnhealthy of the Release: --object, --deadline, --first-unhealthy, --fail-fast, --resource and --guess-resources do not apply"))
	case o.release == "" && (len(o.rules) == 0 || len(o.objects) == 0):
		return usageError(errors.New("give --rules and --object (or --release NAMESPACE/NAME)"))
	case o.release == "" && o.serviceAccount != clustercache.DefaultServiceAccount:
		return usageError(errors.New("--default-service-account applies to --release only"))
	case env.conn.namespace() != "":
		return usageError(errors.New("-n does not apply: the objects' namespaces are those in their files, and --release takes NAMESPACE/NAME"))
	}
	deadline, err := parseDeadline(o.deadline)
	if err != nil {
		return usageError(fmt.Errorf("invalid --deadline %w", err))
	}
	anchor, err := parseInstant(o.firstUnhealthy)
	if err != nil {
		return usageError(fmt.Errorf("invalid --first-unhealthy %w", err))
	}
	now := env.now()
	if t, err := parseInstant(o.now); err != nil {
		return usageError(fmt.Errorf("invalid --now %w", err))
	} else if t != nil {
		now = *t
	}

	var global []extv1alpha1.GlobalHealthRuleSet
	var local []extv1alpha1.HealthRuleSet
	for _, path := range o.rules {
		g, l, err := readRuleSets(path)
		if err != nil {
			return inputError(err)
		}
		global, local = append(global, g...), append(local, l...)
	}
	if o.release != "" {
		return o.runRelease(ctx, env, now, global, local)
	}
	var objects []unstructured.Unstructured
	for _, path := range o.objects {
		objs, err := readObjects(path)
		if err != nil {
			return inputError(err)
		}
		// A nameless object cannot be live: most likely a fragment or a template. It is
		// evaluated, since the rules do not need the name, but not silently.
		for i := range objs {
			if objs[i].GetName() == "" {
				fmt.Fprintf(env.stderr, "%s: warning: object %d of %s (%s of %s) has no metadata.name, which a live object always has: "+
					"evaluated as given, its line has an empty name\n", env.name, i+1, path, sanitize(objs[i].GetKind()), sanitize(objs[i].GetAPIVersion()))
			}
		}
		objects = append(objects, objs...)
	}

	mapper, err := newResourceMapper(o.resources, env.conn, o.cluster, o.guess)
	if err != nil {
		return err
	}
	mappings := make([]resourceMapping, len(objects))
	for i := range objects {
		m, err := mapper.resourceFor(objects[i].GetAPIVersion(), objects[i].GetKind())
		if err != nil {
			return inputError(fmt.Errorf("%s %s: %w", sanitize(objects[i].GetKind()), sanitize(objectName(&objects[i])), err))
		}
		if m.guessed {
			kind := sanitize(objects[i].GetKind())
			fmt.Fprintf(env.stderr, "%s: guessed resource %q for kind %s of %s (%s); name it with --resource %s=PLURAL\n", env.name,
				m.resource, kind, sanitize(objects[i].GetAPIVersion()), sanitize(objectName(&objects[i])), kind)
		}
		mappings[i] = m
	}

	ev, err := health.NewEvaluator(global, local)
	if err != nil {
		var ce *health.CompileError
		if errors.As(err, &ce) {
			return &exitError{code: exitCompileError, err: fmt.Errorf("rule set does not compile: %w", err)}
		}
		return fmt.Errorf("building the evaluator: %w", err)
	}

	// Each line is escaped for a terminal (escapeUnsafeJSON): a message comes from a
	// rule's messageExpression.
	out := newLineWriter(env.stdout)
	jo := judging{anchor: anchor, deadline: deadline, now: now, failFast: o.failFast, list: listFrom(objects)}
	for i := range objects {
		line, err := evaluate(ctx, ev, &objects[i], mappings[i], jo)
		if err != nil {
			return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted: %d of %d objects evaluated", i, len(objects))}
		}
		if err := out.write(line); err != nil {
			return err
		}
	}
	return nil
}

// lineWriter prints values as JSON lines, with the characters that act on a terminal
// escaped (escapeUnsafeJSON): a message comes from a rule's messageExpression.
type lineWriter struct {
	out io.Writer
	b   bytes.Buffer
	enc *json.Encoder
}

func newLineWriter(out io.Writer) *lineWriter {
	w := &lineWriter{out: out}
	w.enc = json.NewEncoder(&w.b)
	w.enc.SetEscapeHTML(false)
	return w
}

// write prints v as one line.
func (w *lineWriter) write(v any) error {
	w.b.Reset()
	if err := w.enc.Encode(v); err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	if _, err := w.out.Write(escapeUnsafeJSON(w.b.Bytes())); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	return nil
}

// judging is how evaluate judges a result: the entry's firstUnhealthy anchor, the
// deadline (nil: none), the time of the pass, the Release's failFast, and where the Pods
// of a failing workload are listed from (nil: no diagnosis).
type judging struct {
	anchor   *time.Time
	deadline *time.Duration
	now      time.Time
	failFast bool
	list     diagnosis.ListFunc
}

// evaluate assesses one object as the health loop's observeItem and judgeEntry do: the rules match the
// object's apiVersion and its resource; a failing workload is diagnosed from j.list, and
// with j.failFast a terminal diagnosis makes it Degraded. It returns ctx's error, and no
// line, once ctx is done.
func evaluate(ctx context.Context, ev *health.Evaluator, obj *unstructured.Unstructured, m resourceMapping, jo judging) (evalLine, error) {
	r, err := ev.EvaluateContext(ctx, obj.GetAPIVersion(), m.resource, obj.Object)
	if err != nil {
		return evalLine{}, err
	}
	var d diagnosis.Diagnosis
	if r.Outcome == health.Fail && jo.list != nil {
		d, _ = diagnosis.Diagnose(ctx, obj, jo.list) // listing objects in memory never fails
	}
	j := health.JudgeFailFast(r, jo.anchor, jo.deadline, jo.now, jo.failFast, d.Terminal)
	if j.State == v1alpha1.StateHealthy {
		d = diagnosis.Diagnosis{}
	}
	line := evalLine{
		APIVersion: obj.GetAPIVersion(),
		Kind:       obj.GetKind(),
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		State:      j.State,
		Message:    r.Message,
		DecidedBy:  j.DecidedBy,

		RulesApplied: r.RulesApplied,
		Diagnosis:    d.Message,
	}
	if m.guessed {
		line.ResourceGuessed = m.resource
	}
	return line, nil
}

// listFrom lists from objs as a target cluster would for a diagnosis: the objects of
// the resource (by apiVersion and kind), in the namespace, whose labels match.
func listFrom(objs []unstructured.Unstructured) diagnosis.ListFunc {
	return func(_ context.Context, gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error) {
		kind := map[string]string{"pods": "Pod", "replicasets": "ReplicaSet"}[gvr.Resource]
		var out []unstructured.Unstructured
		for i := range objs {
			o := &objs[i]
			if o.GetAPIVersion() == gvr.GroupVersion().String() && o.GetKind() == kind && o.GetNamespace() == namespace &&
				sel.Matches(labels.Set(o.GetLabels())) {
				out = append(out, *o)
			}
		}
		return out, nil
	}
}
