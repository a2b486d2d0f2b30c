package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// The demo's Release and its settings.
const (
	releaseName    = "demo"
	clusterName    = "local"
	healthDeadline = 20 * time.Second
	syncInterval   = 5 * time.Second
	// userManager applies what a user would: the namespace, the Cluster, the Release.
	userManager = "convoy-demo"
	// platformManager applies what the platform's operator would: the read identity.
	platformManager = "convoy-demo-platform"
	// pollInterval is the period of the snapshots.
	pollInterval = 500 * time.Millisecond
)

// errTimeout is the cause of the scenario's context when --timeout passes.
var errTimeout = errors.New("the demo's --timeout passed")

// condFunc tells what a step still waits for (nothing: the step's state is reached),
// or returns an error when the step cannot succeed any more.
type condFunc func(*snapshot) (missing []string, err error)

// stepResult is how a step of the scenario went.
type stepResult struct {
	Name     string
	Duration time.Duration
	// Syncs counts the sync requests seen during the step.
	Syncs int
}

// scenario is the demo: a good render r1 rolled out in two waves with a hook between
// them until everything is Healthy, then a bad render r2 whose Deployment goes
// Progressing and then Degraded, then r3 (r2 rolled back) and r4 whose Pods
// crash-loop, Degraded at once with failFast.
type scenario struct {
	d    *driver
	m    *monitor
	disp *display
	// checks fail the scenario when a process of the demo stopped.
	checks []func() error
	// cli runs convoyctl release wait.
	cli cliAccess
	// crashAfter is how old a Pod of r4 is when it shows its crash loop (crashLoop).
	crashAfter time.Duration

	results         []stepResult
	progressingSeen bool
	last            *snapshot
}

// setupRelease creates the demo namespace, the Cluster "local" (no kubeconfigSecretRef:
// the cluster the observer runs in) and the Release, and returns the Release.
func setupRelease(ctx context.Context, c client.Client) (*v1alpha1.Release, error) {
	objects := []struct {
		what string
		ac   runtime.ApplyConfiguration
	}{
		{"Namespace " + demoNamespace, corev1ac.Namespace(demoNamespace)},
		{"Cluster " + clusterName, acv1alpha1.Cluster(clusterName, demoNamespace).WithSpec(acv1alpha1.ClusterSpec())},
		{"Release " + releaseName, acv1alpha1.Release(releaseName, demoNamespace).WithSpec(acv1alpha1.ReleaseSpec().
			WithClusterRef(acv1alpha1.ClusterReference().WithName(clusterName)).
			WithHealthAssessment(acv1alpha1.HealthAssessment().
				WithGlobalRuleSetSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"convoy.kumodo.io/default": "true"})).
				WithDeadline(metav1.Duration{Duration: healthDeadline})).
			WithSyncPolicy(acv1alpha1.SyncPolicy().WithInterval(metav1.Duration{Duration: syncInterval})))},
	}
	for _, o := range objects {
		if err := c.Apply(ctx, o.ac, client.FieldOwner(userManager), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying %s: %w", o.what, err)
		}
	}
	if err := grantReadIdentity(ctx, c); err != nil {
		return nil, err
	}
	rel := &v1alpha1.Release{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: releaseName}, rel); err != nil {
		return nil, err
	}
	return rel, nil
}

// run plays the scenario; it returns when the bad Deployment is Degraded, or with the
// reason why it could not get there.
func (s *scenario) run(ctx context.Context) error {
	good, bad := goodRender("r1"), badRender("r2")

	if err := s.rollout(ctx, good); err != nil {
		return err
	}
	for w := int32(0); w <= good.lastWave(); w++ {
		final := w == good.lastWave()
		if err := s.wave(ctx, good, w, syncFindingState, s.waveHealthy(good, w, final)); err != nil {
			return err
		}
		for _, h := range good.Hooks {
			if h.AfterWave != w {
				continue
			}
			since, err := s.mark(ctx)
			if err != nil {
				return err
			}
			if err := s.d.runHook(ctx, h); err != nil {
				return err
			}
			s.disp.Event("hook %s: applied Job %s and recorded the hook (timeout %s); waiting for it to succeed and for a sync request",
				h.Name, objectName(*h.Job.Namespace, *h.Job.Name), h.Timeout)
			if err := s.waitFor(ctx, "hook "+h.Name, since, syncFindingState, s.hookSucceeded(h.Name)); err != nil {
				return err
			}
		}
	}
	s.disp.Event("%s: every object Healthy and the hook Succeeded: Release Healthy", good.Ref)
	if err := s.releaseWait(ctx, waitHealthy); err != nil {
		return err
	}

	if err := s.rollout(ctx, bad); err != nil {
		return err
	}
	if err := s.wave(ctx, bad, 0, syncFindingState, s.waveHealthy(bad, 0, false)); err != nil {
		return err
	}
	if err := s.wave(ctx, bad, 1, noSync, s.deploymentDegraded(bad)); err != nil {
		return err
	}
	if !s.progressingSeen {
		return fmt.Errorf("Deployment %s/%s turned Degraded at %s without being seen Progressing first", demoNamespace, deployName, bad.Ref)
	}
	s.disp.Event("%s: Deployment %s/%s Degraded after the deadline of %s: the Release is not Healthy", bad.Ref, demoNamespace, deployName, healthDeadline)
	// A pipeline waiting for r2 fails at once, naming the Degraded Deployment.
	if err := s.releaseWait(ctx, waitDegraded); err != nil {
		return err
	}
	return s.failFast(ctx)
}

// failFast plays r3, the rollback of r2 to r1's objects, then r4: the user turns
// spec.healthAssessment.failFast on, and the new image of the Deployment crash-loops. The observer reads the failing Deployment's current
// Pods, names the crashing one, and the Deployment is Degraded at once (cause
// FailedFast), well before the deadline.
func (s *scenario) failFast(ctx context.Context) error {
	// First the fix of r2 (r1's objects again, no hook): everything Healthy, so that the
	// Deployment's failure at r4 starts a fresh anchor, far from the deadline.
	fix := &render{Ref: "r3", Objects: objects("1", nil, nil)}
	if err := s.rollout(ctx, fix); err != nil {
		return err
	}
	for w := int32(0); w <= fix.lastWave(); w++ {
		if err := s.wave(ctx, fix, w, syncFindingState, s.waveHealthy(fix, w, w == fix.lastWave())); err != nil {
			return err
		}
	}
	s.disp.Event("%s: r2 rolled back, every object Healthy again", fix.Ref)
	if err := setFailFast(ctx, s.d.c); err != nil {
		return err
	}
	s.disp.Event("Release %s/%s: spec.healthAssessment.failFast=true (a workload whose Pods fail for good is Degraded at once)", demoNamespace, releaseName)
	sim, stop := context.WithCancel(ctx)
	defer stop()
	go crashLoop(sim, s.d.c, s.crashAfter)
	crash := crashRender("r4")
	crash.expect = fmt.Sprintf("its new Pods crash-loop (the demo plays their kubelet); waiting for Deployment %s/%s to be Degraded at once by failFast, before the deadline of %s, and for a sync request",
		demoNamespace, deployName, healthDeadline)
	if err := s.rollout(ctx, crash); err != nil {
		return err
	}
	if err := s.wave(ctx, crash, 0, syncFindingState, s.waveHealthy(crash, 0, false)); err != nil {
		return err
	}
	// The wave's render advanced: the observer sends a sync request in the first pass
	// that assesses the wave at r4, whatever the Deployment's state is then, so the step
	// waits for both, in either order. That pass may write Degraded just before the
	// request (a snapshot between the two ended the step without it), or, when the
	// Deployment's new Pods do not crash yet, Progressing, and Degraded comes in a later
	// pass without a request of its own (the controller-manager watches the inventory).
	if err := s.wave(ctx, crash, 1, syncDuringStep, s.deploymentFailedFast(crash)); err != nil {
		return err
	}
	last := s.results[len(s.results)-1]
	if e := s.last.entry("Deployment", demoNamespace, deployName); e != nil {
		s.disp.Event("%s: Deployment %s/%s Degraded %s after its wave was applied (cause FailedFast, deadline %s): %s",
			crash.Ref, demoNamespace, deployName, last.Duration.Round(100*time.Millisecond), healthDeadline, e.Diagnosis)
	}
	return s.releaseWait(ctx, waitDegraded)
}

// rollout starts the rollout of r.
func (s *scenario) rollout(ctx context.Context, r *render) error {
	if err := s.d.startRollout(ctx, r); err != nil {
		return err
	}
	s.disp.Event("%s: rollout started (status.lastAttempted.renderRef=%s, status.rollout.startedAt=now)", r.Ref, r.Ref)
	return nil
}

// syncNeed is what a step waits for from the observer's sync requests, besides its
// state.
type syncNeed int

const (
	// noSync: the state alone ends the step.
	noSync syncNeed = iota
	// syncFindingState: a sync request that found the state holding (seen in a snapshot
	// showing it, or in a later one): the edge that the state is (a completed wave, a
	// finished hook) is what advances the controller-manager.
	syncFindingState
	// syncDuringStep: a sync request since the step began, before the state or after it.
	syncDuringStep
)

// wave applies wave w of r and waits until cond holds and for the observer's sync
// request that need says, which is what advances the controller-manager.
func (s *scenario) wave(ctx context.Context, r *render, w int32, need syncNeed, cond condFunc) error {
	since, err := s.mark(ctx)
	if err != nil {
		return err
	}
	objs, err := s.d.applyWave(ctx, r, w)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.Kind+" "+objectName(o.Namespace, o.Name))
	}
	what := "waiting for them to be Healthy and for a sync request"
	switch {
	case r.expect != "" && w == r.lastWave():
		what = r.expect
	case need == noSync:
		what = fmt.Sprintf("waiting for Deployment %s/%s to go Progressing, then Degraded after %s", demoNamespace, deployName, healthDeadline)
	}
	s.disp.Event("%s wave %d: applied %s; recorded them in ReleaseInventory %s/%s; %s",
		r.Ref, w, strings.Join(names, ", "), s.d.namespace, s.d.name, what)
	return s.waitFor(ctx, fmt.Sprintf("%s wave %d", r.Ref, w), since, need, cond)
}

// mark takes a snapshot so that the sync requests seen so far are counted before the
// next action, and returns their count.
func (s *scenario) mark(ctx context.Context) (int, error) {
	snap, err := s.m.take(ctx)
	if err != nil {
		return 0, err
	}
	s.disp.Snapshot(snap)
	s.last = snap
	return snap.Syncs, nil
}

// waitFor polls until cond holds and the sync request that need says arrived after
// syncsBefore: the driver advances only on a sync, like convoy's controller-manager
// woken by the observer.
func (s *scenario) waitFor(ctx context.Context, step string, syncsBefore int, need syncNeed, cond condFunc) error {
	start := time.Now()
	consumed := syncsBefore
	// Until the first snapshot is checked, everything the step waits for is missing: a
	// timeout that ends the step before then still says what it waited for.
	missing := []string{"the state of step " + strconv.Quote(step) + " (not checked yet: no snapshot was read before the step ended)"}
	var lastErr error
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		for _, check := range s.checks {
			if err := check(); err != nil {
				return fmt.Errorf("step %q: %w", step, err)
			}
		}
		snap, err := s.m.take(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			lastErr = err
		case err == nil:
			lastErr = nil
			s.last = snap
			s.disp.Snapshot(snap)
			var fatal error
			if missing, fatal = cond(snap); fatal != nil {
				return fmt.Errorf("step %q: %w", step, fatal)
			}
			newSync := snap.Syncs > consumed
			consumed = snap.Syncs
			if need == syncDuringStep {
				newSync = snap.Syncs > syncsBefore
			}
			if len(missing) == 0 {
				if need == noSync || newSync {
					s.results = append(s.results, stepResult{Name: step, Duration: time.Since(start), Syncs: snap.Syncs - syncsBefore})
					return nil
				}
				missing = []string{"a sync request from the observer (the state is reached; none arrived since)"}
			} else if need != noSync && snap.Syncs == syncsBefore {
				missing = append(missing, "a sync request from the observer (none since the step began)")
			}
		}
		select {
		case <-ctx.Done():
			return s.stopped(ctx, step, start, missing, lastErr)
		case <-tick.C:
		}
	}
}

// stopError is the error of a step that the timeout or an interrupt ended.
type stopError struct{ msg string }

func (e *stopError) Error() string { return e.msg }

// stopped explains why a step ended without reaching its state.
func (s *scenario) stopped(ctx context.Context, step string, start time.Time, missing []string, lastErr error) error {
	var b strings.Builder
	if errors.Is(context.Cause(ctx), errTimeout) {
		fmt.Fprintf(&b, "timed out in step %q after %s in the step", step, time.Since(start).Round(time.Second))
	} else {
		fmt.Fprintf(&b, "interrupted in step %q", step)
	}
	if len(missing) > 0 {
		b.WriteString("; still missing:")
		for _, m := range missing {
			b.WriteString("\n  - " + m)
		}
	}
	if lastErr != nil {
		fmt.Fprintf(&b, "\n  last error: %v", lastErr)
	}
	return &stopError{msg: b.String()}
}
