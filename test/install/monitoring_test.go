package install

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// analysis is hack/promrules' answer for one expression.
type analysis struct {
	Source    string `json:"source"`
	Expr      string `json:"expr"`
	Selectors []struct {
		Metric string   `json:"metric"`
		Labels []string `json:"labels"`
	} `json:"selectors"`
	Grouping []string `json:"grouping"`
}

// targetLabels are the labels Prometheus adds to every scraped series (the Prometheus
// Operator's ServiceMonitor targets); le is every histogram bucket's.
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "service": true, "endpoint": true, "container": true}

// TestMonitoring validates config/monitoring's rules with Prometheus' rule parser and
// checks every metric and label its alerts and dashboard name against what the observer
// and convoy-api expose.
func TestMonitoring(t *testing.T) {
	r := demo(t)
	exposed := map[string]map[string]bool{} // metric → labels
	for _, f := range []string{"convoy-observer.metrics", "convoy-api.metrics"} {
		scraped(t, filepath.Join(r.metricsDir, f), exposed)
	}
	declared(t, filepath.Join(r.root, "internal"), exposed)

	rules := promrules(t, r.root, nil, "rules", filepath.Join(r.root, "config", "monitoring", "prometheusrule.yaml"))
	var exprs []string
	dash, err := os.ReadFile(filepath.Join(r.root, "config", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var titles []string
	// Grafana's variables, as the dashboard defines them, before PromQL parses the query.
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", "convoy-observer", "$api_job", "convoy-api")
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q, _ := json.Marshal(vars.Replace(tg.Expr))
			exprs = append(exprs, string(q))
			titles = append(titles, p.Title)
		}
	}
	if len(exprs) == 0 {
		t.Fatal("dashboard.json has no query")
	}
	queries := promrules(t, r.root, []byte(strings.Join(exprs, "\n")+"\n"), "exprs")
	if len(queries) != len(exprs) {
		t.Fatalf("%d analyses for %d dashboard queries", len(queries), len(exprs))
	}
	for i := range queries {
		queries[i].Source = "dashboard panel " + strconv.Quote(titles[i])
	}
	for _, a := range append(rules, queries...) {
		labels := map[string]bool{}
		for _, s := range a.Selectors {
			have, ok := exposed[s.Metric]
			if !ok {
				t.Errorf("%s: metric %s is exposed by neither convoy-observer nor convoy-api", a.Source, s.Metric)
				continue
			}
			for _, l := range s.Labels {
				if !have[l] && !targetLabels[l] {
					t.Errorf("%s: metric %s has no label %s (it has %v)", a.Source, s.Metric, l, keys(have))
				}
			}
			for l := range have {
				labels[l] = true
			}
		}
		for _, g := range a.Grouping {
			if !labels[g] && !targetLabels[g] {
				t.Errorf("%s: groups by %s, which none of its metrics has", a.Source, g)
			}
		}
	}
	t.Logf("%d alerts and %d dashboard queries checked against %d exposed metrics", len(rules), len(queries), len(exposed))
}

// scraped adds the metric families of a /metrics file to exposed (a histogram also as
// NAME_bucket with le, NAME_sum and NAME_count; a summary with quantile).
func scraped(t *testing.T, file string, exposed map[string]map[string]bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(fams) == 0 {
		t.Fatalf("%s holds no metric", file)
	}
	for name, f := range fams {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		names := []string{name}
		switch f.GetType().String() {
		case "HISTOGRAM":
			names = append(names, name+"_sum", name+"_count")
			withLe := maps(labels, "le")
			merge(exposed, name+"_bucket", withLe)
		case "SUMMARY":
			labels["quantile"] = true
			names = append(names, name+"_sum", name+"_count")
		}
		for _, n := range names {
			merge(exposed, n, labels)
		}
	}
}

// declared adds the metrics that internal/ declares with prometheus.New*(…Opts{Name: …},
// []string{labels…}) to exposed: a vector has no series until its first event (a write
// conflict, a watch fallback), which the scenario may not cause.
func declared(t *testing.T, dir string, exposed map[string]map[string]bool) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "New") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
				return true
			}
			opts, ok := call.Args[0].(*ast.CompositeLit)
			if !ok {
				return true
			}
			name := ""
			for _, el := range opts.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
						if lit, ok := kv.Value.(*ast.BasicLit); ok {
							name, _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
			if name == "" {
				return true
			}
			labels := map[string]bool{}
			if len(call.Args) > 1 {
				if lst, ok := call.Args[1].(*ast.CompositeLit); ok {
					for _, el := range lst.Elts {
						if lit, ok := el.(*ast.BasicLit); ok {
							l, _ := strconv.Unquote(lit.Value)
							labels[l] = true
						}
					}
				}
			}
			merge(exposed, name, labels)
			if strings.Contains(sel.Sel.Name, "Histogram") {
				merge(exposed, name+"_bucket", maps(labels, "le"))
				merge(exposed, name+"_sum", labels)
				merge(exposed, name+"_count", labels)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func merge(exposed map[string]map[string]bool, name string, labels map[string]bool) {
	if exposed[name] == nil {
		exposed[name] = map[string]bool{}
	}
	for l := range labels {
		exposed[name][l] = true
	}
}

func maps(labels map[string]bool, more ...string) map[string]bool {
	out := map[string]bool{}
	for l := range labels {
		out[l] = true
	}
	for _, l := range more {
		out[l] = true
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// promrules runs hack/promrules (Prometheus' parsers, from its own module file) with args and
// stdin, and decodes its JSON lines; a rule or query it refuses fails the test.
func promrules(t *testing.T, root string, stdin []byte, args ...string) []analysis {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "-tags", "promrules", "-modfile", filepath.Join("hack", "promrules", "promrules.mod"), "./hack/promrules"}, args...)...)
	cmd.Dir = root
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/promrules %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("hack/promrules %s: %s", args[0], time.Since(start).Round(time.Second))
	var out []analysis
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var a analysis
		if err := dec.Decode(&a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}
