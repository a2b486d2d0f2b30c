package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// recordedEntry is one ConfigMap entry as the observer wrote it: its state, and the
// decidedBy ("" for none: "KIND NAMESPACE/NAME RULE CAUSE") and rulesApplied (-1 for
// none) it recorded.
type recordedEntry struct {
	state     v1alpha1.HealthState
	decidedBy string
	rules     int32
}

// recordedInventory writes the inventory of the Release default/name: every entry as the
// controller-manager records it, and the observer's fields of those with a state.
func recordedInventory(t *testing.T, name string, entries map[string]recordedEntry) {
	t.Helper()
	var recorded, judged []*acv1alpha1.InventoryEntryApplyConfiguration
	for n, e := range entries {
		recorded = append(recorded, entry("", "ConfigMap", "default", n).WithVersion("v1").WithResource("configmaps").WithWave(0).WithRenderRef("r1"))
		if e.state == "" {
			continue
		}
		a := assessed("", "ConfigMap", "default", n, e.state, "r1", "", nil)
		if e.rules >= 0 {
			a.WithRulesApplied(e.rules)
		}
		if e.decidedBy != "" {
			var kind, set, cause string
			var rule int32
			if _, err := fmt.Sscanf(e.decidedBy, "%s %s %d %s", &kind, &set, &rule, &cause); err != nil {
				t.Fatalf("decidedBy %q: %v", e.decidedBy, err)
			}
			ns, setName, _ := strings.Cut(set, "/")
			a.WithDecidedBy(acv1alpha1.EntryDecider().WithKind(kind).WithNamespace(ns).WithName(setName).WithRule(rule).WithCause(cause))
		}
		judged = append(judged, a)
	}
	mustApply(t, cmManager, name, recorded)
	mustApply(t, invManager, name, judged)
}

// recordedHealth answers /health of default/name and returns, per entry name,
// "DECIDEDBY RULESAPPLIED" ("-" and "null" for absent ones), and decidedByError.
func recordedHealth(t *testing.T, name string) (map[string]string, string) {
	t.Helper()
	srv, _ := newServer(t, nil)
	_, body := getHealth(t, srv.URL+syncapi.HealthPath("default", name))
	var doc syncapi.HealthResult
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range doc.Entries {
		d, n := "-", "null"
		if e.DecidedBy != nil {
			d = fmt.Sprintf("%s %s/%s %d %s", e.DecidedBy.Kind, e.DecidedBy.Namespace, e.DecidedBy.Name, e.DecidedBy.Rule, e.DecidedBy.Cause)
		}
		if e.RulesApplied != nil {
			n = fmt.Sprint(*e.RulesApplied)
		}
		out[e.Name] = d + " " + n
	}
	return out, doc.DecidedByError
}

// TestHealthShowsRecordedDecisions: /health answers each entry's decidedBy and
// rulesApplied as the observer recorded them in the inventory, and nothing else: there
// are no rule sets, no Cluster and no objects to read here. A Healthy entry has no
// decidedBy, an unassessed one neither field, and an entry an older observer assessed
// (a state, no recorded fields) has neither, which decidedByError counts.
func TestHealthShowsRecordedDecisions(t *testing.T) {
	t.Parallel()
	const name = "recorded"
	createRelease(t, name, "r1", nil)
	recordedInventory(t, name, map[string]recordedEntry{
		"failing": {v1alpha1.StateProgressing, "HealthRuleSet default/tenant 1 RuleFailed", 2},
		"late":    {v1alpha1.StateDegraded, "GlobalHealthRuleSet /convoy-defaults 0 DeadlinePassed", 1},
		"broken":  {v1alpha1.StateUnknown, "HealthRuleSet default/tenant 0 EvaluationError", 2},
		"missing": {v1alpha1.StateUnknown, "", 1},
		"ok":      {v1alpha1.StateHealthy, "", 1},
		"nothing": {v1alpha1.StateHealthy, "", 0},
		"older":   {v1alpha1.StateProgressing, "", -1},
		"new":     {"", "", -1},
	})
	got, decidedByError := recordedHealth(t, name)
	want := map[string]string{
		"failing": "HealthRuleSet default/tenant 1 RuleFailed 2",
		"late":    "GlobalHealthRuleSet /convoy-defaults 0 DeadlinePassed 1",
		"broken":  "HealthRuleSet default/tenant 0 EvaluationError 2",
		"missing": "- 1",
		"ok":      "- 1",
		"nothing": "- 0",
		"older":   "- null",
		"new":     "- null",
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: %s, want %s", n, got[n], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries %v, want %d", got, len(want))
	}
	mustContain(t, "decidedByError", decidedByError, "the observer has not recorded decidedBy and rulesApplied for 1 of the 8 entries yet")
}

// TestHealthWithoutAssessmentJudgesNothing: a Release without spec.healthAssessment
// selects no rule, so every entry has rulesApplied 0 and no decidedBy, whatever an
// earlier assessment left in the inventory; nothing is missing, so no decidedByError.
func TestHealthWithoutAssessmentJudgesNothing(t *testing.T) {
	t.Parallel()
	const name = "recorded-unconfigured"
	rel := createRelease(t, name, "r1", nil)
	rel.Spec.HealthAssessment = nil
	if err := env.Client.Update(context.Background(), rel); err != nil {
		t.Fatal(err)
	}
	recordedInventory(t, name, map[string]recordedEntry{
		"stale": {v1alpha1.StateProgressing, "HealthRuleSet default/tenant 0 RuleFailed", 1},
		"older": {v1alpha1.StateHealthy, "", -1},
		"new":   {"", "", -1},
	})
	got, decidedByError := recordedHealth(t, name)
	for _, n := range []string{"stale", "older", "new"} {
		if got[n] != "- 0" {
			t.Errorf("%s: %s, want no decidedBy and rulesApplied 0", n, got[n])
		}
	}
	if decidedByError != "" {
		t.Errorf("decidedByError = %q, want none", decidedByError)
	}
}
