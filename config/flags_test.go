package config_test

import (
	"flag"
	"os"
	"regexp"
	"testing"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kumodo/convoy-observer/internal/observer"
	"github.com/kumodo/convoy-observer/internal/syncapi/apiserver"
)

// TestDocsNameEveryFlag keeps docs/operations.md in step with the flags of both binaries.
func TestDocsNameEveryFlag(t *testing.T) {
	data, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for bin, flags := range map[string]*flag.FlagSet{"convoy-observer": observerFlags(t), "convoy-api": apiFlags(t)} {
		flags.VisitAll(func(f *flag.Flag) {
			if !regexp.MustCompile(`(^|[^\w-])--` + regexp.QuoteMeta(f.Name) + `([^\w-]|$)`).MatchString(doc) {
				t.Errorf("docs/operations.md does not name --%s of %s", f.Name, bin)
			}
		})
	}
}

// observerFlags mirrors the flags of cmd/convoy-observer: the option groups of
// observer.Options, component-base's logging flags and --version.
func observerFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	fss := cliflag.NamedFlagSets{}
	observer.NewOptions().AddFlags(&fss)
	logsapi.AddFlags(logsapi.NewLoggingConfiguration(), fss.FlagSet("logging"))
	fss.FlagSet("generic").Bool("version", false, "print the version")
	fs := goFlags(fss)
	for _, want := range []string{"sync-url", "shard", "leader-elect", "leader-elect-resource-namespace", "health-probe-bind-address", "insecure-kubeconfig-exec", "kubeconfig", "logging-format"} {
		if fs.Lookup(want) == nil {
			t.Fatalf("convoy-observer has no --%s", want)
		}
	}
	return fs
}

// apiFlags mirrors the flags of cmd/convoy-api: the options of
// internal/syncapi/apiserver (k8s.io/apiserver's serving, authentication and
// authorization flags), component-base's logging flags and --version.
func apiFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	fss := cliflag.NamedFlagSets{}
	apiserver.NewOptions().AddFlags(&fss)
	logsapi.AddFlags(logsapi.NewLoggingConfiguration(), fss.FlagSet("logging"))
	fss.FlagSet("generic").Bool("version", false, "print the version")
	fs := goFlags(fss)
	for _, want := range []string{"kubeconfig", "secure-port", "tls-cert-file", "tls-private-key-file", "authentication-kubeconfig", "authorization-kubeconfig", "v"} {
		if fs.Lookup(want) == nil {
			t.Fatalf("convoy-api has no --%s", want)
		}
	}
	// convoy-api reads no target cluster: no flag about a target's kubeconfig.
	for _, gone := range []string{"insecure-kubeconfig-exec", "insecure-kubeconfig-files"} {
		if fs.Lookup(gone) != nil {
			t.Fatalf("convoy-api has --%s, but it reads no target cluster", gone)
		}
	}
	return fs
}

// goFlags returns a standard-library flag set with the names of the flags of fss
// (deprecated ones left out): a bool stays a bool (it may be given without a value),
// every other flag takes a string.
func goFlags(fss cliflag.NamedFlagSets) *flag.FlagSet {
	pfs := pflag.NewFlagSet("all", pflag.ContinueOnError)
	for _, name := range fss.Order {
		pfs.AddFlagSet(fss.FlagSets[name])
	}
	fs := flag.NewFlagSet(pfs.Name(), flag.ContinueOnError)
	pfs.VisitAll(func(f *pflag.Flag) {
		if f.Deprecated != "" {
			return
		}
		if f.Value.Type() == "bool" {
			fs.Bool(f.Name, false, f.Usage)
		} else {
			fs.String(f.Name, "", f.Usage)
		}
	})
	return fs
}
