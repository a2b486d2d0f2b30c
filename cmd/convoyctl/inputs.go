// Reading the inputs of the health commands: deadlines, instants, rule-set files and
// object files.

package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gobuffalo/flect"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health/manifest"
)

// parseDeadline reads a deadline given as a Go duration ("10m"); "" is none (nil). It
// refuses a negative one.
func parseDeadline(s string) (*time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	if d < 0 {
		return nil, fmt.Errorf("%q: must not be negative", s)
	}
	return &d, nil
}

// parseInstant reads a time given in RFC 3339; "" is none (nil).
func parseInstant(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	return &t, nil
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(obj *unstructured.Unstructured) string {
	return toolscache.MetaObjectToName(obj).String()
}

// readRuleSets reads the rule sets of one file.
func readRuleSets(path string) ([]extv1alpha1.GlobalHealthRuleSet, []extv1alpha1.HealthRuleSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading rules: %w", err)
	}
	defer f.Close()
	g, l, err := manifest.DecodeRuleSets(f)
	if err != nil {
		return nil, nil, fmt.Errorf("reading rules %s: %w", path, err)
	}
	return g, l, nil
}

// readObjects reads the objects of one file.
func readObjects(path string) ([]unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading objects: %w", err)
	}
	defer f.Close()
	objs, err := manifest.DecodeObjects(f)
	if err != nil {
		return nil, fmt.Errorf("reading objects %s: %w", path, err)
	}
	return objs, nil
}

// guessResource guesses the plural lowercase resource of kind the way kubebuilder's
// controller-gen names a CRD's plural (github.com/gobuffalo/flect): "Ingress" ->
// "ingresses", "NetworkPolicy" -> "networkpolicies", "Gateway" -> "gateways", "Proxy" ->
// "proxies"; "" for an empty kind. Built-in kinds that break the convention are known
// to the offline mapper before a guess is made.
func guessResource(kind string) string {
	if kind == "" {
		return ""
	}
	return strings.ToLower(flect.Pluralize(kind))
}
