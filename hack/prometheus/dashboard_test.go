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

package prometheus

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

const dashboardFile = "artifacts/monitoring/dashboards/dockerios.json"

// notOnDashboard are the metrics DockerIOS registers that no panel shows,
// and why.
var notOnDashboard = map[string]string{}

// dashboard is what the test reads of the Grafana dashboard.
type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
	// Templating's queries name metrics too (label_values(metric, label)).
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no title, uid or panels", dashboardFile)
	}
	return d
}

// labelValues is a Grafana variable query naming a metric.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)

// Every query of the dashboard parses as PromQL and selects only metrics
// DockerIOS registers or that externalMetrics names, every panel but a
// row has a query, and every dockerios_ metric the code registers is on
// some panel (or in notOnDashboard, with the reason).
func TestDashboard_PanelsShowMetricsThatExist(t *testing.T) {
	d := loadDashboard(t)
	registered := registeredMetrics(t)
	shown := map[string]bool{}
	check := func(where, expr string) {
		names, err := metricsOf(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		for _, n := range names {
			shown[n] = true
			if registered[n] == "" && externalMetrics[n] == "" {
				t.Errorf("%s selects %s, which nothing registers", where, n)
			}
		}
	}

	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %d %q has no query", p.ID, p.Title)
			}
			for _, tg := range p.Targets {
				check("panel "+p.Title+" query "+tg.RefID, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if err := json.Unmarshal(v.Query, &s); err != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
			q.Query = s
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, q.Query)
			continue
		}
		check("variable "+v.Name, m[1])
	}

	for _, name := range dockeriosMetrics(registered) {
		if !shown[name] && !shown[name+"_bucket"] && notOnDashboard[name] == "" {
			t.Errorf("%s (registered in %s) is on no panel of %s; add one or say why in notOnDashboard", name, registered[name], dashboardFile)
		}
	}
	for name := range notOnDashboard {
		if registered[name] == "" {
			t.Errorf("notOnDashboard names %s, which nothing registers", name)
		}
	}
}

// The scan finds the metrics DockerIOS is known to register, of each
// kind of declaration: a check that reads nothing would pass everything.
func TestRegisteredMetrics_FindsEachKindOfDeclaration(t *testing.T) {
	registered := registeredMetrics(t)

	for _, name := range []string{
		"dockerios_controller_reconciles_total",            // prometheus.CounterOpts
		"dockerios_machine_create_to_ready_seconds_bucket", // prometheus.HistogramOpts
		"dockerios_machines",                               // prometheus.NewDesc
		"dockerios_identity_ledger_repairs_total",          // component-base's &metrics.CounterOpts, Namespace_Subsystem_Name
		"dockerios_controller_leader",                      // prometheus.GaugeOpts in a GaugeFunc
	} {
		if registered[name] == "" {
			t.Errorf("the source scan does not find %s", name)
		}
	}
}
