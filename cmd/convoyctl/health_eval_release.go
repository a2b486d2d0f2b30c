// health eval --release: a dry run of rules against a live Release's recorded objects.

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/diagnosis"
	"github.com/kumodo/convoy-observer/internal/clustercache"
	"github.com/kumodo/convoy-observer/internal/healthloop"
	"github.com/kumodo/convoy-observer/internal/inventory"
)

// recordedLine is what the observer recorded for an entry (health eval --release's
// "recorded"): its state, message, deciding rule and diagnosis as the inventory holds
// them; state "" before the first assessment.
type recordedLine struct {
	State     v1alpha1.HealthState `json:"state"`
	Message   string               `json:"message"`
	DecidedBy *health.Decider      `json:"decidedBy,omitempty"`
	Diagnosis string               `json:"diagnosis,omitempty"`
}

// releaseLine is one line of health eval --release: the evalLine of the entry's live
// object under the candidate rules, then what the observer recorded.
type releaseLine struct {
	evalLine
	Recorded recordedLine `json:"recorded"`
}

// runRelease is health eval --release NS/NAME: it reads the Release, its
// ReleaseInventory and the rule sets it selects from the management cluster (o's
// kubeconfig), adds the sets of the --rules files, reads each recorded entry's object
// live from the Release's Cluster as the observer reaches it (the Cluster's kubeconfig
// Secret, or the management cluster, as the Cluster's read identity: docs/security.md)
// and prints, per entry in the inventory's order, the state the rules give now (with the
// entry's firstUnhealthy, the Release's deadline and failFast) beside the recorded one.
// It writes nothing. Exit 1 when the Release, its inventory or its Cluster cannot be
// read or the rules do not compile; 2 on usage errors.
func (o *evalOptions) runRelease(ctx context.Context, env *cliEnv, now time.Time, extraGlobal []extv1alpha1.GlobalHealthRuleSet, extraLocal []extv1alpha1.HealthRuleSet) error {
	ns, name, ok := strings.Cut(o.release, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return usageError(fmt.Errorf("--release %q: want NAMESPACE/NAME", o.release))
	}
	cfg, cl, err := managementClient(env.conn)
	if err != nil {
		return err
	}
	clusterErr := func(format string, args ...any) error {
		return &exitError{code: exitClusterError, err: fmt.Errorf(format, args...)}
	}
	rel := &v1alpha1.Release{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rel); err != nil {
		return clusterErr("reading Release %s: %w", o.release, err)
	}
	var global []extv1alpha1.GlobalHealthRuleSet
	var local []extv1alpha1.HealthRuleSet
	if rel.Spec.HealthAssessment != nil {
		sets := &ruleSetLists{reader: cl, local: map[string][]extv1alpha1.HealthRuleSet{}}
		if global, local, err = sets.selectFor(ctx, rel); err != nil {
			return clusterErr("Release %s: %w", o.release, err)
		}
	}
	ev, err := health.NewEvaluator(append(global, extraGlobal...), append(local, extraLocal...))
	if err != nil {
		var ce *health.CompileError
		if errors.As(err, &ce) {
			return &exitError{code: exitCompileError, err: fmt.Errorf("rule set does not compile: %w", err)}
		}
		return fmt.Errorf("building the evaluator: %w", err)
	}
	inv := &v1alpha1.ReleaseInventory{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(rel), inv); err != nil {
		return clusterErr("reading the ReleaseInventory %s: %w", o.release, err)
	}
	entries, _, err := inventory.RecordedEntries(inv, "")
	if err != nil {
		return clusterErr("reading the entries of the ReleaseInventory %s: %w", o.release, err)
	}
	cluster := &v1alpha1.Cluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: rel.Spec.ClusterRef.Name}, cluster); err != nil {
		return clusterErr("reading Cluster %s/%s of Release %s: %w", ns, rel.Spec.ClusterRef.Name, o.release, err)
	}
	cc := clustercache.New(clustercache.Options{Local: cfg, SecretReader: cl, DefaultServiceAccount: o.serviceAccount})
	reader, err := cc.GetReader(ctx, cluster)
	if err != nil {
		return clusterErr("Cluster %s/%s: %s", ns, cluster.Name, clustercache.DescribeError(err))
	}
	var list diagnosis.ListFunc
	if l, ok := reader.(clustercache.ObjectLister); ok {
		list = l.List
	}
	deadline := deadlineOf(rel)
	failFast := rel.Spec.HealthAssessment.GetFailFast()

	out := newLineWriter(env.stdout)
	for i := range entries {
		e := &entries[i]
		line, err := o.evaluateEntry(ctx, ev, reader, e, judging{anchor: timeOf(e), deadline: deadline, now: now, failFast: failFast, list: list})
		if err != nil {
			return clusterErr("Cluster %s/%s: %s", ns, cluster.Name, clustercache.DescribeError(err))
		}
		if err := out.write(line); err != nil {
			return err
		}
	}
	return nil
}

// evaluateEntry reads e's object with reader as the loop does (healthloop.ReadEntryObject)
// and evaluates it (evaluate); an object that cannot be read is Unknown with the loop's
// message. The error is the cluster's, when it does not answer.
func (o *evalOptions) evaluateEntry(ctx context.Context, ev *health.Evaluator, reader clustercache.ObjectReader, e *v1alpha1.InventoryEntry, jo judging) (releaseLine, error) {
	out := releaseLine{Recorded: recordedLine{State: e.State, Message: e.Message, DecidedBy: inventory.DeciderOf(e.DecidedBy), Diagnosis: e.Diagnosis}}
	obj, failure, err := healthloop.ReadEntryObject(ctx, reader, e, logr.Discard())
	if err != nil {
		return out, err
	}
	if failure != "" {
		out.evalLine = evalLine{APIVersion: e.APIVersion(), Kind: e.Kind, Namespace: e.Namespace, Name: e.Name,
			State: v1alpha1.StateUnknown, Message: health.TruncateMessage(failure), RulesApplied: ev.RulesApplied(e.APIVersion(), e.Resource)}
		return out, nil
	}
	line, err := evaluate(ctx, ev, obj, resourceMapping{resource: e.Resource}, jo)
	if err != nil {
		return out, err
	}
	out.evalLine = line
	return out, nil
}

// timeOf is e's firstUnhealthy, nil when unset.
func timeOf(e *v1alpha1.InventoryEntry) *time.Time {
	if e.FirstUnhealthy == nil {
		return nil
	}
	t := e.FirstUnhealthy.Time
	return &t
}

// deadlineOf is rel's spec.healthAssessment.deadline; nil when it has none.
func deadlineOf(rel *v1alpha1.Release) *time.Duration {
	d, ok := rel.GetDeadline()
	if !ok {
		return nil
	}
	return &d
}
