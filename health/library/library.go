// Package library holds the rule library: opt-in GlobalHealthRuleSets for kinds that
// convoy-defaults does not judge (HorizontalPodAutoscaler, Ingress, Service of type
// LoadBalancer, PodDisruptionBudget, CronJob, APIService, CustomResourceDefinition,
// Namespace), the generic kstatus conventions, and popular CRDs (cert-manager, Flux,
// Argo Rollouts, KEDA, Gateway API). Each set is one YAML file in this folder, installed
// with `kubectl apply -k config/rules/library` and selected by a Release through its
// labels:
//
//	spec:
//	  healthAssessment:
//	    globalRuleSetSelector:
//	      matchLabels: {convoy.kumodo.io/rule-library: "true"}   # every set
//	    # or only some: matchExpressions:
//	    #   [{key: convoy.kumodo.io/rule-set, operator: In, values: [cert-manager, flux]}]
//
// docs/rule-library.md describes every rule and compares its verdicts, fixture by
// fixture, with Argo CD's built-in health checks. The files are embedded so tests, the
// linter and tools read exactly what ships.
package library

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/manifest"
)

// Labels of every set of the library.
const (
	// LabelLibrary is "true" on every set: select it to use the whole library.
	LabelLibrary = "convoy.kumodo.io/rule-library"
	// LabelSet names the set (for example "cert-manager"), to select some sets only.
	LabelSet = "convoy.kumodo.io/rule-set"
)

// Files holds the YAML files of the library, one GlobalHealthRuleSet each.
//
//go:embed *.yaml
var Files embed.FS

// FileNames returns the names of the library's files, sorted.
func FileNames() []string {
	names, _ := fs.Glob(Files, "*.yaml") // the pattern is valid
	sort.Strings(names)
	return names
}

// RuleSets decodes every set of the library, in file-name order. An error names the
// file; it means the embedded files are broken, which the package's tests rule out.
func RuleSets() ([]extv1alpha1.GlobalHealthRuleSet, error) {
	var out []extv1alpha1.GlobalHealthRuleSet
	for _, name := range FileNames() {
		b, err := Files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		g, l, err := manifest.DecodeRuleSets(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(g) != 1 || len(l) != 0 {
			return nil, fmt.Errorf("%s: want one GlobalHealthRuleSet, got %d GlobalHealthRuleSets and %d HealthRuleSets", name, len(g), len(l))
		}
		out = append(out, g...)
	}
	return out, nil
}
