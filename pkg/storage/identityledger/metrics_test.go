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

package identityledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

// Once registered, the repairs counter has a series for every kind of
// drift the repair loop knows (every Drift constant of repair.go), so the
// first repair of a kind is an increase, not the birth of a series.
func TestRegisterMetrics_EveryDriftKindHasARepairsSeries(t *testing.T) {
	// setup
	declared := driftConstants(t)

	// execute
	RegisterMetrics()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}

	// assert
	var series []string
	for _, mf := range mfs {
		if mf.GetName() != "dockerios_identity_ledger_repairs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "drift" {
					series = append(series, l.GetValue())
				}
			}
		}
	}
	for _, kind := range declared {
		if !slices.Contains(series, kind) {
			t.Errorf("no dockerios_identity_ledger_repairs_total{drift=%q} series after RegisterMetrics (have %v)", kind, series)
		}
	}
}

// driftConstants are the values of the Drift* constants of repair.go.
func driftConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "repair.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Drift") || i >= len(vs.Values) {
				continue
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				kinds = append(kinds, strings.Trim(lit.Value, `"`))
			}
		}
		return true
	})
	if len(kinds) < 10 {
		t.Fatalf("found only %d Drift constants in repair.go: %v", len(kinds), kinds)
	}
	return kinds
}
