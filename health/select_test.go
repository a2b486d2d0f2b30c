package health_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

func TestSelectRuleSets(t *testing.T) {
	t.Parallel()
	defaults := map[string]string{"convoy.kumodo.io/default": "true"}
	team := map[string]string{"team": "payments"}
	global := []extv1alpha1.GlobalHealthRuleSet{
		globalSet("zeta", defaults), globalSet("alpha", team), globalSet("convoy-defaults", defaults),
	}
	local := []extv1alpha1.HealthRuleSet{
		localSet("demo", "web", team), localSet("other", "abc", team), localSet("demo", "api", nil),
	}
	cases := []struct {
		name                string
		globalSel, localSel *metav1.LabelSelector
		ns                  string
		wantGlobal          []string
		wantLocal           []string // namespace/name
		wantErr             string
	}{
		{name: "nil selects nothing", ns: "demo"},
		{name: "{} selects all, sorted by name", globalSel: &metav1.LabelSelector{}, localSel: &metav1.LabelSelector{}, ns: "demo",
			wantGlobal: []string{"alpha", "convoy-defaults", "zeta"}, wantLocal: []string{"demo/api", "demo/web"}},
		{name: "matchLabels", globalSel: &metav1.LabelSelector{MatchLabels: defaults}, ns: "demo",
			wantGlobal: []string{"convoy-defaults", "zeta"}},
		{name: "matchExpressions", ns: "demo",
			localSel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"payments", "search"}}}},
			wantLocal: []string{"demo/web"}},
		{name: "another namespace's HealthRuleSet is never used", localSel: &metav1.LabelSelector{}, ns: "other",
			wantLocal: []string{"other/abc"}},
		{name: "no HealthRuleSet in the namespace", localSel: &metav1.LabelSelector{}, ns: "empty"},
		{name: "invalid global selector", ns: "demo",
			globalSel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}},
			wantErr:   "globalRuleSetSelector"},
		{name: "invalid local selector", ns: "demo", globalSel: &metav1.LabelSelector{},
			localSel: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "not a valid value!"}},
			wantErr:  "localRuleSetSelector"},
	}
	all := &metav1.LabelSelector{}
	if _, _, err := health.SelectRuleSets(global, local, all, all, "demo"); err != nil {
		t.Fatal(err)
	}
	if global[0].Name != "zeta" || local[0].Name != "web" {
		t.Errorf("SelectRuleSets reordered its arguments")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, l, err := health.SelectRuleSets(global, local, tc.globalSel, tc.localSel, tc.ns)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gotGlobal, gotLocal []string
			for _, s := range g {
				gotGlobal = append(gotGlobal, s.Name)
			}
			for _, s := range l {
				gotLocal = append(gotLocal, s.Namespace+"/"+s.Name)
			}
			if strings.Join(gotGlobal, ",") != strings.Join(tc.wantGlobal, ",") {
				t.Errorf("global %v, want %v", gotGlobal, tc.wantGlobal)
			}
			if strings.Join(gotLocal, ",") != strings.Join(tc.wantLocal, ",") {
				t.Errorf("local %v, want %v", gotLocal, tc.wantLocal)
			}
		})
	}
}
