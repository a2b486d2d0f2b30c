package library_test

import (
	"strings"
	"testing"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/library"
)

// builtinGroups are the groups of built-in kinds, whose deletion the companion-workloads
// and legacy-apis sets judge kind by kind, not companion-deletion.
var builtinGroups = map[string]bool{"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true,
	"networking.k8s.io": true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true}

// TestDeletionCoversLibrary: for every apiVersion and resource that a library rule judges
// outside the built-in groups, the library says that an object being deleted is not
// Healthy, and says why ("being deleted …"); companion-deletion passes an object of any
// other group unread (rulesApplied 0), being deleted or not.
func TestDeletionCoversLibrary(t *testing.T) {
	t.Parallel()
	sets, err := library.RuleSets()
	if err != nil {
		t.Fatal(err)
	}
	var deletion []extv1alpha1.GlobalHealthRuleSet
	for _, s := range sets {
		if s.Name == "companion-deletion" {
			deletion = append(deletion, s)
		}
	}
	ev, err := health.NewEvaluator(deletion, nil)
	if err != nil || len(deletion) != 1 {
		t.Fatalf("companion-deletion: %d sets, %v", len(deletion), err)
	}
	whole, err := health.NewEvaluator(sets, nil)
	if err != nil {
		t.Fatal(err)
	}
	deleting := func(apiVersion string) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": "Thing",
			"metadata": map[string]any{"name": "x", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
	}
	checked := 0
	for _, s := range sets {
		for _, r := range s.Spec.Rules {
			group, version, _ := strings.Cut(r.APIVersion, "/")
			if version == "" {
				group, version = "", group
			}
			if builtinGroups[group] || r.APIVersion == "*" {
				continue
			}
			if strings.HasPrefix(group, "*.") {
				group = "example" + group[1:]
			}
			if version == "*" {
				version = "v1"
			}
			apiVersion := group + "/" + version
			for _, res := range r.Resources {
				if res == "*" {
					res = "things"
				}
				got := whole.Evaluate(apiVersion, res, deleting(apiVersion))
				if got.Outcome != health.Fail || !strings.HasPrefix(got.Message, "being deleted") {
					t.Errorf("%s rule for %s %s: a deleted object gives %+v, want Fail being deleted since …: add the group or the resource to deletion.yaml",
						s.Name, apiVersion, res, got)
				}
				checked++
			}
		}
	}
	if checked < 300 {
		t.Errorf("%d pairs checked: the library went missing", checked)
	}
	for _, av := range []string{"v1", "apps/v1", "example.com/v1", "cert-manager.io.example.org/v1"} {
		if got := ev.Evaluate(av, "certificates", deleting(av)); got.Outcome != health.Pass || got.RulesApplied != 0 {
			t.Errorf("%s certificates being deleted: %+v, want Pass with 0 rules applied", av, got)
		}
	}
}
