package observer_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kumodo/convoy-observer/internal/observer"
)

func TestLeaseNameIsUniquePerShardSet(t *testing.T) {
	t.Parallel()
	if got := observer.LeaseName(nil); got != "convoy-observer-shard-default" {
		t.Fatalf("default shard lease = %q", got)
	}
	if observer.LeaseName([]string{""}) != observer.LeaseName(nil) {
		t.Fatal(`--shard "" and no --shard must share the default Lease`)
	}
	if observer.LeaseName([]string{"b", "a"}) != observer.LeaseName([]string{"a", "b", "a"}) {
		t.Fatal("the Lease must not depend on flag order or repeats")
	}
	sets := [][]string{nil, {"default"}, {"a-b"}, {"a", "b"}, {"EU"}, {"eu"}, {"eu_west"}, {"eu-west"},
		{strings.Repeat("x", 50) + "1"}, {strings.Repeat("x", 50) + "2"}, {"ü"}, {"ö"}}
	seen := map[string][]string{}
	for _, s := range sets {
		name := observer.LeaseName(s)
		if prev, dup := seen[name]; dup {
			t.Errorf("shard sets %q and %q share the Lease %s", prev, s, name)
		}
		seen[name] = s
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || len(name) > 63 {
			t.Errorf("Lease name %q is not a valid name: %v", name, errs)
		}
	}
}
