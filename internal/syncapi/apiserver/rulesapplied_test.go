package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// appliedEntry is one inventory entry of recordedRelease: its keys, version and resource,
// the state the observer wrote and the rulesApplied it recorded (-1: none, as an
// observer that does not record it writes the entry).
type appliedEntry struct {
	group, version, kind, resource, name, state string
	rules                                       int64
}

// recordedRelease creates in ns the Release name (selecting the HealthRuleSets labelled
// rules=selector; "" for a Release without spec.healthAssessment) and an inventory that
// records entries as the controller-manager and the observer write them.
func recordedRelease(t *testing.T, ns, name, selector string, entries ...appliedEntry) {
	t.Helper()
	ctx := context.Background()
	rel := &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "target"}},
	}
	if selector != "" {
		rel.Spec.HealthAssessment = &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rules": selector}}}
	}
	must(t, env.Client.Create(ctx, rel))
	for _, manager := range []string{"convoy-controller-manager", "convoy-health-inventory"} {
		var list []any
		for _, e := range entries {
			m := map[string]any{"group": e.group, "kind": e.kind, "namespace": ns, "name": e.name}
			if manager == "convoy-controller-manager" {
				m["version"], m["resource"], m["wave"], m["renderRef"] = e.version, e.resource, int64(0), "r1"
			} else {
				m["state"], m["assessedRenderRef"] = e.state, "r1"
				if e.rules >= 0 {
					m["rulesApplied"] = e.rules
				}
			}
			list = append(list, m)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "ReleaseInventory",
			"metadata": map[string]any{"name": name, "namespace": ns}, "entries": list,
		}}
		must(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership))
	}
}

// TestHealthRulesAppliedThroughTheAggregator: every assessed /health entry says how many
// of the Release's selected rules match it, as the observer recorded it, so that a
// Healthy entry that nothing judged shows rulesApplied 0; a Release without
// spec.healthAssessment has 0 everywhere; entries that an observer assessed without
// recording the count have null, and decidedByError says so, even when every entry is
// Healthy. convoy-api lists no rule set for it (it has no grant to).
func TestHealthRulesAppliedThroughTheAggregator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := tenant(t, "applied")
	entries := func(rules ...int64) []appliedEntry {
		return []appliedEntry{
			{"", "v1", "ConfigMap", "configmaps", "cfg", "Healthy", rules[0]},
			{"", "v1", "Secret", "secrets", "creds", "Healthy", rules[1]},
			{"apps", "v1", "Deployment", "deployments", "web", "Healthy", rules[2]},
			{"apps", "v1", "StatefulSet", "statefulsets", "db", "Healthy", rules[3]},
			{"example.com", "v1", "Widget", "widgets", "w", "Healthy", rules[4]},
		}
	}
	recordedRelease(t, ns, "judged", "good", entries(1, 0, 2, 1, 0)...)
	recordedRelease(t, ns, "unconfigured", "", entries(-1, -1, -1, -1, -1)...)
	recordedRelease(t, ns, "older", "good", entries(-1, -1, 2, -1, -1)...)
	cfg, err := env.AddUser("rita")
	must(t, err)
	bind(t, ns, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "rita"})
	rita := syncapiclient.NewClient(cfg)

	applied := func(name string) (map[string]string, string) {
		t.Helper()
		var h *syncapi.HealthResult
		eventually(t, 10*time.Second, func() error { // RBAC and the informers settle
			if h, err = rita.Health(ctx, ns, name); err != nil {
				return err
			}
			if len(h.Entries) != 5 {
				return fmt.Errorf("%s: %d entries, want 5", name, len(h.Entries))
			}
			return nil
		})
		out := map[string]string{}
		for _, e := range h.Entries {
			out[e.Name] = "null"
			if e.RulesApplied != nil {
				out[e.Name] = fmt.Sprint(*e.RulesApplied)
			}
		}
		return out, h.DecidedByError
	}
	for _, tc := range []struct {
		release, want, decidedByError string
	}{
		{"judged", "cfg=1 creds=0 db=1 w=0 web=2", ""},
		{"unconfigured", "cfg=0 creds=0 db=0 w=0 web=0", ""},
		{"older", "cfg=null creds=null db=null w=null web=2", "has not recorded decidedBy and rulesApplied for 4 of the 5 entries"},
	} {
		got, errText := applied(tc.release)
		var parts []string
		for _, n := range []string{"cfg", "creds", "db", "w", "web"} {
			parts = append(parts, n+"="+got[n])
		}
		if s := strings.Join(parts, " "); s != tc.want {
			t.Errorf("%s: rulesApplied %s, want %s", tc.release, s, tc.want)
		}
		if (tc.decidedByError == "") != (errText == "") || !strings.Contains(errText, tc.decidedByError) {
			t.Errorf("%s: decidedByError %q, want %q", tc.release, errText, tc.decidedByError)
		}
	}
}
