// promrules: Prometheus's own rule-file check, for aiadmit's tests.
//
// Why: aiadmit ships Prometheus alerting rules (a PrometheusRule in the chart and in
// manifests/components/monitoring). promtool's `check rules` cannot be built here cheaply (its command pulls in
// every service-discovery plugin); this tool calls the same function it calls, rulefmt.Parse of
// github.com/prometheus/prometheus (pinned in go.mod), which decodes the groups strictly (unknown fields are
// errors), parses every `expr` with Prometheus's PromQL parser, and checks names, labels, durations and the
// annotation templates. A test tool only, never the product.
//
// Usage: promrules FILE... where each FILE is a Prometheus rule file (`groups:` at the top, the `spec` of a
// PrometheusRule). Output: one JSON object on stdout,
//
//	{"files": [{"file": F, "errors": ["..."], "rules": [{"group": G, "name": N, "kind": "alert"|"record",
//	  "metrics": ["metric_name", ...]}]}]}
//
// `metrics` are the metric names every vector selector of the expression names (by name or by an equality
// matcher on __name__), as the parser sees them. Exit status 0 even with errors (the test reads them); 2 on a
// usage error.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

type ruleOut struct {
	Group   string   `json:"group"`
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Metrics []string `json:"metrics"`
}

type fileOut struct {
	File   string    `json:"file"`
	Errors []string  `json:"errors"`
	Rules  []ruleOut `json:"rules"`
}

func metricNames(p parser.Parser, expr string) ([]string, error) {
	node, err := p.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			seen[vs.Name] = true
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				seen[m.Value] = true
			}
		}
		return nil
	})
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: promrules FILE...")
		os.Exit(2)
	}
	// Prometheus 3's defaults: UTF-8 metric and label names, the standard function set.
	p := parser.NewParser(parser.Options{})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := struct {
		Files []fileOut `json:"files"`
	}{}
	for _, file := range os.Args[1:] {
		result := fileOut{File: file, Errors: []string{}, Rules: []ruleOut{}}
		groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, p, logger)
		for _, err := range errs {
			result.Errors = append(result.Errors, err.Error())
		}
		if groups != nil {
			for _, group := range groups.Groups {
				for _, rule := range group.Rules {
					r := ruleOut{Group: group.Name, Name: rule.Alert, Kind: "alert"}
					if rule.Record != "" {
						r.Name, r.Kind = rule.Record, "record"
					}
					names, err := metricNames(p, rule.Expr)
					if err != nil {
						result.Errors = append(result.Errors, fmt.Sprintf("%s: %s: %v", file, r.Name, err))
					}
					r.Metrics = append([]string{}, names...)
					result.Rules = append(result.Rules, r)
				}
			}
		}
		out.Files = append(out.Files, result)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
