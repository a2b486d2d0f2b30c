package v1alpha1_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

func objectFor(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func TestRuleSetAdmission(t *testing.T) {
	t.Parallel()
	ruleSet := func(name string, rule map[string]any) map[string]any {
		return map[string]any{
			"apiVersion": "extensions.convoy.kumodo.io/v1alpha1",
			"kind":       "GlobalHealthRuleSet",
			"metadata":   map[string]any{"name": name},
			"spec":       map[string]any{"rules": []any{rule}},
		}
	}
	cases := []struct {
		name      string
		rule      map[string]any
		wantField string // "" means accepted
	}{
		{"no-apiversion", map[string]any{"resources": []any{"pods"}, "ruleExpression": "true"}, "apiVersion"},
		{"no-ruleexpression", map[string]any{"apiVersion": "v1", "resources": []any{"pods"}}, "ruleExpression"},
		{"empty-ruleexpression", map[string]any{"apiVersion": "v1", "resources": []any{"pods"}, "ruleExpression": ""}, "ruleExpression"},
		{"no-resources", map[string]any{"apiVersion": "v1", "ruleExpression": "true"}, "resources"},
		// Admission does not compile CEL: a broken expression is stored as it is.
		{"broken-cel-accepted", map[string]any{"apiVersion": "v1", "resources": []any{"pods"}, "ruleExpression": "object.status.(("}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := apply(t, "test", ruleSet("admission-"+tc.name, tc.rule))
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want 422 Invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Fatalf("error does not name %s: %v", tc.wantField, err)
			}
		})
	}
}

// TestRuleSetWithoutRules: a rule set's spec must hold rules.
func TestRuleSetWithoutRules(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"GlobalHealthRuleSet", "HealthRuleSet"} {
		obj := map[string]any{"apiVersion": "extensions.convoy.kumodo.io/v1alpha1", "kind": kind,
			"metadata": map[string]any{"name": "no-rules", "namespace": "default"}, "spec": map[string]any{}}
		if kind == "GlobalHealthRuleSet" {
			delete(obj["metadata"].(map[string]any), "namespace")
		}
		err := apply(t, "test", obj)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "rules") {
			t.Errorf("%s without rules: want 422 Invalid naming rules, got %v", kind, err)
		}
	}
}

// TestReleaseAdmission: a Release must name its Cluster, and spec.source keeps fields
// the API does not know (a controller-manager's own settings), at any depth.
func TestReleaseAdmission(t *testing.T) {
	t.Parallel()
	release := func(name string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "Release",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}
	}
	err := apply(t, "test", release("no-cluster", map[string]any{"healthAssessment": map[string]any{}}))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "clusterRef") {
		t.Fatalf("a Release without clusterRef: want 422 Invalid naming clusterRef, got %v", err)
	}
	source := map[string]any{"chart": map[string]any{"name": "web", "values": map[string]any{"replicas": int64(3), "tags": []any{"a", "b"}}}, "anything": "kept"}
	mustApply(t, "test", release("with-source", map[string]any{"clusterRef": map[string]any{"name": "c"}, "source": source}))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Release"))
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "with-source"}, u); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedMap(u.Object, "spec", "source"); !reflect.DeepEqual(got, source) {
		t.Fatalf("spec.source = %v, want %v", got, source)
	}
}

// TestDurationAdmission: duration strings are checked at admission, so a typo can never
// make a Release or an inventory undecodable for the observer's typed informers.
func TestDurationAdmission(t *testing.T) {
	t.Parallel()
	release := func(name string, ha, sp map[string]any) map[string]any {
		spec := map[string]any{"clusterRef": map[string]any{"name": "c"}}
		if ha != nil {
			spec["healthAssessment"] = ha
		}
		if sp != nil {
			spec["syncPolicy"] = sp
		}
		return map[string]any{"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "Release",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}
	}
	hookInv := func(name, timeout string) map[string]any {
		inv := inventory(name)
		inv["hooks"] = []any{map[string]any{"name": "h", "workloadKind": "Job", "timeout": timeout}}
		return inv
	}
	cases := []struct {
		name string
		obj  map[string]any
		ok   bool
	}{
		{"deadline 5m", release("dur-ok", map[string]any{"deadline": "5m"}, map[string]any{"interval": "30s"}), true},
		{"deadline 0s", release("dur-zero", map[string]any{"deadline": "0s"}, nil), true},
		{"deadline words", release("dur-words", map[string]any{"deadline": "5 minutes"}, nil), false},
		{"deadline negative", release("dur-neg", map[string]any{"deadline": "-1m"}, nil), false},
		{"interval words", release("int-words", nil, map[string]any{"interval": "1 minute"}), false},
		{"interval below 1s", release("int-tiny", nil, map[string]any{"interval": "10ms"}), false},
		{"hook timeout empty", hookInv("hook-empty", ""), true},
		{"hook timeout 90s", hookInv("hook-90s", "90s"), true},
		{"hook timeout words", hookInv("hook-words", "ten minutes"), false},
		{"hook timeout zero", hookInv("hook-zero", "0s"), false},
	}
	for _, tc := range cases {
		err := apply(t, "test", tc.obj)
		if tc.ok && err != nil {
			t.Errorf("%s: rejected: %v", tc.name, err)
		}
		if !tc.ok && !apierrors.IsInvalid(err) {
			t.Errorf("%s: want 422 Invalid, got %v", tc.name, err)
		}
	}
	// The empty hook timeout decodes, and means the default.
	inv := getInventory(t, "hook-empty")
	if got := inv.Hooks[0].GetTimeout(); got != v1alpha1.DefaultHookTimeout {
		t.Fatalf("GetTimeout() of an empty timeout = %v", got)
	}
}

// TestReleasePrinterColumns: `kubectl get releases` shows Cluster, Healthy, Reason, Age,
// read from the Healthy condition (the server-side Table that kubectl asks for).
func TestReleasePrinterColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "printer"
	must(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, env.Client.Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: "prod-eu"}}}))
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "convoy.kumodo.io/v1alpha1", "kind": "Release",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Applied", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "Healthy", "status": "False", "reason": "Degraded", "message": "x", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		}},
	}}
	must(t, env.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("test"), client.ForceOwnership))

	hc, err := rest.HTTPClientFor(env.Config)
	must(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(env.Config.Host, "/")+"/apis/convoy.kumodo.io/v1alpha1/namespaces/"+ns+"/releases", nil)
	must(t, err)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var table metav1.Table
	must(t, json.NewDecoder(resp.Body).Decode(&table))
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "Name,Cluster,Healthy,Reason,Age" {
		t.Fatalf("columns = %s", got)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows = %d", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	if cells[1] != "prod-eu" || cells[2] != "False" || cells[3] != "Degraded" {
		t.Fatalf("cells = %v", cells)
	}
}

// TestTimeAdmission: the API server's date-time check ignores case, but metav1.Time does
// not: "2026-01-01t00:00:00z" would be stored and then break every typed read of the
// object (and the typed informers of all Releases). A pattern rejects it at admission.
func TestTimeAdmission(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"2026-01-01T00:00:00Z", true},
		{"2026-01-01T00:00:00.5+02:00", true},
		{"2026-01-01t00:00:00z", false},
		{"2026-01-01T00:00:00z", false},
		{"2026-01-01T00:00:00", false},
		{"2026-01-01T00:00:00+23:59", true},
		{"2026-01-01T00:00:00+99:99", false}, // found by FuzzTimeAdmission: metav1.Time cannot decode it
		{"2026-01-01T00:00:00-00:60", false},
	} {
		inv := inventory("time-"+strings.ToLower(strings.NewReplacer(":", "", ".", "", "+", "").Replace(tc.value)),
			entry("apps", "Deployment", "default", "web", map[string]any{"firstUnhealthy": tc.value}))
		inv["hooks"] = []any{map[string]any{"name": "h", "createdAt": tc.value, "finishedAt": tc.value}}
		err := apply(t, "test", inv)
		if tc.ok && err != nil {
			t.Errorf("%q rejected: %v", tc.value, err)
		}
		if !tc.ok && !apierrors.IsInvalid(err) {
			t.Errorf("%q: want 422 Invalid, got %v", tc.value, err)
		}
	}
}
