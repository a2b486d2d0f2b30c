//go:build promrules

// Command promrules checks the alerting rules and dashboard queries of config/monitoring
// with Prometheus' own parsers, and lists the series each one selects. It builds only
// with the tag promrules and its own module file, so that the Prometheus server module
// (and the newer versions of grpc, otel, x/net … that it requires) stays out of
// convoy-observer's go.mod; test/install runs it from the repository root as
//
//	go run -tags promrules -modfile hack/promrules/promrules.mod ./hack/promrules rules FILE  # a PrometheusRule (or a rule file)
//	go run -tags promrules -modfile hack/promrules/promrules.mod ./hack/promrules exprs       # PromQL on stdin, one JSON string a line
//
// rules validates the groups with model/rulefmt (what Prometheus itself runs on load:
// PromQL, durations, label names, annotation templates); both print, for each expression,
// one JSON line {"expr": …, "selectors": [{"metric": …, "labels": [names matched]}],
// "grouping": [names in by()/without()]}, and exit 1 on the first invalid rule or
// expression, naming it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// Selector is one vector selector of an expression.
type Selector struct {
	Metric string   `json:"metric"`
	Labels []string `json:"labels"`
}

// Expr is what is printed for each expression.
type Expr struct {
	Source    string     `json:"source,omitempty"`
	Expr      string     `json:"expr"`
	Selectors []Selector `json:"selectors"`
	Grouping  []string   `json:"grouping"`
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: promrules rules FILE | promrules exprs < LINES")
	}
	var err error
	switch os.Args[1] {
	case "rules":
		if len(os.Args) != 3 {
			fail("usage: promrules rules FILE")
		}
		err = rules(os.Args[2])
	case "exprs":
		err = exprs()
	default:
		fail("usage: promrules rules FILE | promrules exprs < LINES")
	}
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "promrules: "+msg)
	os.Exit(1)
}

// rules validates FILE and prints its expressions.
func rules(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	// A PrometheusRule carries the rule file's groups under spec.
	var obj struct {
		Kind string    `yaml:"kind"`
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if obj.Kind == "PrometheusRule" {
		if data, err = yaml.Marshal(&obj.Spec); err != nil {
			return err
		}
	}
	groups, errs := rulefmt.Parse(data, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return fmt.Errorf("%s: %v", file, errs)
	}
	enc := json.NewEncoder(os.Stdout)
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				name = r.Record
			}
			e, err := analyse(r.Expr)
			if err != nil {
				return fmt.Errorf("%s: rule %s: %w", file, name, err)
			}
			e.Source = g.Name + "/" + name
			if err := enc.Encode(e); err != nil {
				return err
			}
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: no rules", file)
	}
	return nil
}

// exprs reads JSON strings from stdin and prints each one's analysis.
func exprs() error {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	enc := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var s string
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		e, err := analyse(s)
		if err != nil {
			return err
		}
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return sc.Err()
}

func analyse(expr string) (Expr, error) {
	p := parser.NewParser(parser.Options{})
	node, err := p.ParseExpr(expr)
	if err != nil {
		return Expr{}, fmt.Errorf("%q: %w", expr, err)
	}
	out := Expr{Expr: expr, Selectors: []Selector{}, Grouping: []string{}}
	group := map[string]bool{}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			s := Selector{Metric: n.Name, Labels: []string{}}
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName {
					if s.Metric == "" {
						s.Metric = m.Value
					}
					continue
				}
				s.Labels = append(s.Labels, m.Name)
			}
			sort.Strings(s.Labels)
			out.Selectors = append(out.Selectors, s)
		case *parser.AggregateExpr:
			for _, g := range n.Grouping {
				group[g] = true
			}
		}
		return nil
	})
	for g := range group {
		out.Grouping = append(out.Grouping, g)
	}
	sort.Strings(out.Grouping)
	return out, nil
}
