package config_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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

// observerFlags mirrors the flags of cmd/convoy-observer: those its source defines, the
// zap logging flags when it binds them, and --kubeconfig, which controller-runtime
// registers on flag.CommandLine when the command loads its config with GetConfig.
func observerFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	fs, calls := sourceFlags(t, "../cmd/convoy-observer")
	if calls["BindFlags"] {
		(&zap.Options{}).BindFlags(fs)
	}
	if calls["GetConfig"] || calls["GetConfigOrDie"] {
		fs.String("kubeconfig", "", "controller-runtime")
	}
	for _, want := range []string{"sync-url", "shard", "leader-elect", "health-probe-bind-address"} {
		if fs.Lookup(want) == nil {
			t.Fatalf("found no --%s in cmd/convoy-observer: the source scan is broken", want)
		}
	}
	return fs
}

// apiFlags mirrors the flags of cmd/convoy-api: the options of
// internal/syncapi/apiserver (k8s.io/apiserver's serving, authentication and
// authorization flags) and --v.
func apiFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	pfs := pflag.NewFlagSet("convoy-api", pflag.ContinueOnError)
	apiserver.NewOptions().AddFlags(pfs)
	fs := flag.NewFlagSet("convoy-api", flag.ContinueOnError)
	pfs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			fs.Bool(f.Name, false, f.Usage)
		} else {
			fs.String(f.Name, "", f.Usage)
		}
	})
	fs.Int("v", 0, "log verbosity")
	for _, want := range []string{"kubeconfig", "secure-port", "tls-cert-file", "tls-private-key-file", "authentication-kubeconfig", "authorization-kubeconfig"} {
		if fs.Lookup(want) == nil {
			t.Fatalf("convoy-api has no --%s", want)
		}
	}
	return fs
}

// sourceFlags scans the non-test Go files of dir for flag definitions — calls such as
// fs.StringVar(&v, "name", …), fs.Var(&v, "name", …) or flag.Duration("name", …) — and
// returns a flag set with flags of the same names and types (a Var is a string), plus
// the names of every method or function the source calls.
func sourceFlags(t *testing.T, dir string) (*flag.FlagSet, map[string]bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet(dir, flag.ContinueOnError)
	calls := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			method := sel.Sel.Name
			calls[method] = true
			typ, nameArg := strings.TrimSuffix(method, "Var"), 0
			if typ != method {
				nameArg = 1
			}
			define := map[string]func(string){
				"String":   func(n string) { fs.String(n, "", "") },
				"Bool":     func(n string) { fs.Bool(n, false, "") },
				"Int":      func(n string) { fs.Int(n, 0, "") },
				"Int64":    func(n string) { fs.Int64(n, 0, "") },
				"Uint":     func(n string) { fs.Uint(n, 0, "") },
				"Uint64":   func(n string) { fs.Uint64(n, 0, "") },
				"Float64":  func(n string) { fs.Float64(n, 0, "") },
				"Duration": func(n string) { fs.Duration(n, 0, "") },
				"":         func(n string) { fs.String(n, "", "") }, // Var: a flag.Value
				"Func":     func(n string) { fs.String(n, "", "") },
				"Text":     func(n string) { fs.String(n, "", "") },
			}[typ]
			if define == nil || len(call.Args) <= nameArg {
				return true
			}
			lit, ok := call.Args[nameArg].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, err := strconv.Unquote(lit.Value)
			if err != nil || name == "" || fs.Lookup(name) != nil {
				return true
			}
			define(name)
			return true
		})
	}
	return fs, calls
}
