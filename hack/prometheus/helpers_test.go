/*
Copyright The DockerIOS Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package prometheus holds the checks of artifacts/monitoring that need
// Prometheus's own code: promtool (built by hack/build-promtool.sh) runs
// the alerting rules' unit tests, and the PromQL parser reads the rules'
// and the dashboard's queries so that every metric they name is one
// DockerIOS registers (read from its source) or kube-apiserver serves.
package prometheus

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	promparser "github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// root is the DockerIOS repository this module sits in.
const root = "../.."

// externalMetrics are the metrics the rules and the dashboard may use that
// DockerIOS's code does not register, and who serves them.
var externalMetrics = map[string]string{
	"aggregator_unavailable_apiservice": "kube-apiserver (its aggregator)",
	"up":                                "Prometheus, per scrape target",
	"process_resident_memory_bytes":     "client_golang's process collector, in the controller and (through component-base) the apiserver",
}

// registeredMetrics are the names of the metrics DockerIOS's code
// registers, read from the non-test Go source under cmd, pkg and agent:
// the Namespace, Subsystem and Name of every client_golang or
// component-base *Opts literal, and the name of every NewDesc. A histogram
// or summary adds its _bucket, _sum and _count series. The values are the
// files that register them.
func registeredMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range []string{"cmd", "pkg", "agent"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					kind := selectorName(n.Type)
					if !strings.HasSuffix(kind, "Opts") {
						return true
					}
					fields := map[string]string{}
					for _, el := range n.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						key, _ := kv.Key.(*ast.Ident)
						if key == nil || (key.Name != "Namespace" && key.Name != "Subsystem" && key.Name != "Name") {
							continue
						}
						s, ok := stringLit(kv.Value)
						if !ok {
							t.Errorf("%s: %s.%s is not a string literal: the scan cannot name the metric", fset.Position(kv.Pos()), kind, key.Name)
						}
						fields[key.Name] = s
					}
					if fields["Name"] == "" {
						return true
					}
					var parts []string
					for _, k := range []string{"Namespace", "Subsystem", "Name"} {
						if fields[k] != "" {
							parts = append(parts, fields[k])
						}
					}
					name := strings.Join(parts, "_")
					out[name] = rel
					switch kind {
					case "HistogramOpts":
						out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = rel, rel, rel
					case "SummaryOpts":
						out[name+"_sum"], out[name+"_count"] = rel, rel
					}
				case *ast.CallExpr:
					if selectorName(n.Fun) == "NewDesc" && len(n.Args) > 0 {
						if s, ok := stringLit(n.Args[0]); ok {
							out[s] = rel
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func selectorName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// dockeriosMetrics are the registered metrics whose names start with
// dockerios_, histograms by their base name.
func dockeriosMetrics(registered map[string]string) []string {
	var out []string
	for name := range registered {
		if !strings.HasPrefix(name, "dockerios_") {
			continue
		}
		if base, ok := strings.CutSuffix(name, "_bucket"); ok && registered[base] != "" {
			continue
		}
		if base, ok := cutAny(name, "_sum", "_count"); ok && registered[base] != "" {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func cutAny(s string, suffixes ...string) (string, bool) {
	for _, suf := range suffixes {
		if base, ok := strings.CutSuffix(s, suf); ok {
			return base, true
		}
	}
	return s, false
}

// grafanaVariable is a Grafana variable in a query: $name, ${name} or
// ${name:format}, and the built-in $__rate_interval and the like.
var grafanaVariable = regexp.MustCompile(`\$\{[^}]+\}|\$[A-Za-z_][A-Za-z0-9_]*`)

// metricsOf are the metric names expr selects. Grafana's variables are
// replaced first: ranges by 5m, others (label values) by a regular
// expression matching anything.
func metricsOf(expr string) ([]string, error) {
	expr = grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		switch strings.Trim(v, "${}") {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		}
		return ".*"
	})
	node, err := promparser.NewParser(promparser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	var names []string
	promparser.Inspect(node, func(n promparser.Node, _ []promparser.Node) error {
		if vs, ok := n.(*promparser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	if len(names) == 0 {
		return nil, fmt.Errorf("%q selects no metric", expr)
	}
	return names, nil
}

// readYAML reads path (relative to the repository) into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
