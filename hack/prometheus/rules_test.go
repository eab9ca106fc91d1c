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
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	ruleFile  = "artifacts/monitoring/prometheusrule.yaml"
	testsDir  = "artifacts/monitoring/tests"
	runbooks  = "docs/operators/alerts.md"
	rulesName = "dockerios-rules.yaml" // what the tests' rule_files name
)

// alert is one alerting rule of the PrometheusRule, and the rule as
// shipped (every field, for the rules file promtool reads).
type alert struct {
	name, expr, forDuration string
	annotations             map[string]any
	raw                     map[string]any
}

// shippedRules is the PrometheusRule's spec (a Prometheus rules file:
// groups) and its alerting rules.
func shippedRules(t *testing.T) (map[string]any, []alert) {
	t.Helper()
	var obj map[string]any
	readYAML(t, ruleFile, &obj)
	spec, _ := obj["spec"].(map[string]any)
	groups, _ := spec["groups"].([]any)
	var alerts []alert
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			m, _ := r.(map[string]any)
			name, _ := m["alert"].(string)
			if name == "" {
				continue
			}
			expr, _ := m["expr"].(string)
			forDuration, _ := m["for"].(string)
			annotations, _ := m["annotations"].(map[string]any)
			alerts = append(alerts, alert{name: name, expr: expr, forDuration: forDuration, annotations: annotations, raw: m})
		}
	}
	if len(alerts) == 0 {
		t.Fatalf("%s has no alerting rule", ruleFile)
	}
	return spec, alerts
}

// promtool is bin/promtool (hack/build-promtool.sh), or
// DOCKERIOS_PROMTOOL_BIN.
func promtool(t *testing.T) string {
	t.Helper()
	path := os.Getenv("DOCKERIOS_PROMTOOL_BIN")
	if path == "" {
		abs, err := filepath.Abs(filepath.Join(root, "bin", "promtool"))
		if err != nil {
			t.Fatal(err)
		}
		path = abs
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("promtool not found at %s: run hack/build-promtool.sh (or set DOCKERIOS_PROMTOOL_BIN)", path)
	}
	return path
}

// workDir is a scratch directory holding spec as the rules file the tests
// name and the test files (all, or those named).
func workDir(t *testing.T, spec map[string]any, tests ...string) string {
	t.Helper()
	dir := t.TempDir()
	data, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rulesName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		tests = testFiles(t)
	}
	for _, f := range tests {
		data, err := os.ReadFile(filepath.Join(root, testsDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testFiles(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(root, testsDir, "*.yaml"))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no rule tests in %s (%v)", testsDir, err)
	}
	var out []string
	for _, m := range matches {
		out = append(out, filepath.Base(m))
	}
	return out
}

func run(t *testing.T, dir, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// The rules file is valid and lint-clean for promtool.
func TestAlertingRules_PromtoolCheckRules(t *testing.T) {
	spec, _ := shippedRules(t)
	dir := workDir(t, spec)

	out, err := run(t, dir, promtool(t), "check", "rules", "--lint=all", "--lint-fatal", rulesName)

	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// Every rule test passes.
func TestAlertingRules_PromtoolTestRules(t *testing.T) {
	spec, _ := shippedRules(t)
	dir := workDir(t, spec)

	out, err := run(t, dir, promtool(t), append([]string{"test", "rules"}, testFiles(t)...)...)

	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// ruleTest is what a rule test file says of one alert.
type ruleTest struct {
	fires, quiet bool     // a case expects it firing; a case expects it not
	files        []string // the test files with a case for it
}

// ruleTests reads the test files: per alert, whether some case expects it
// to fire and some case expects it not to.
func ruleTests(t *testing.T) map[string]*ruleTest {
	t.Helper()
	out := map[string]*ruleTest{}
	for _, f := range testFiles(t) {
		var file struct {
			RuleFiles []string `json:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		readYAML(t, filepath.Join(testsDir, f), &file)
		if !slices.Equal(file.RuleFiles, []string{rulesName}) {
			t.Errorf("%s: rule_files is %v, want [%s] (the shipped rules, written there by this test)", f, file.RuleFiles, rulesName)
		}
		for _, tc := range file.Tests {
			for _, a := range tc.AlertRuleTest {
				rt := out[a.Alertname]
				if rt == nil {
					rt = &ruleTest{}
					out[a.Alertname] = rt
				}
				if len(a.ExpAlerts) > 0 {
					rt.fires = true
				} else {
					rt.quiet = true
				}
				if !slices.Contains(rt.files, f) {
					rt.files = append(rt.files, f)
				}
			}
		}
	}
	return out
}

// Every alert has a case where it fires and one where it does not, and
// every alert the tests name exists.
func TestAlertingRules_EveryAlertIsTestedFiringAndNot(t *testing.T) {
	_, alerts := shippedRules(t)
	tests := ruleTests(t)

	for _, a := range alerts {
		rt := tests[a.name]
		switch {
		case rt == nil:
			t.Errorf("%s: no rule test", a.name)
		case !rt.fires:
			t.Errorf("%s: no case where it fires", a.name)
		case !rt.quiet:
			t.Errorf("%s: no case where it does not fire", a.name)
		}
	}
	for name := range tests {
		if !slices.ContainsFunc(alerts, func(a alert) bool { return a.name == name }) {
			t.Errorf("the rule tests name %s, which is no alert of %s", name, ruleFile)
		}
	}
}

// Each alert's tests fail when the alert is broken: its metrics renamed
// (a typo, or a metric that was renamed in the code), its condition
// always or never true, or its for-duration a minute shorter or longer.
// A test that still passed would not be testing the alert.
func TestAlertingRules_TestsFailWhenAnAlertIsBroken(t *testing.T) {
	_, alerts := shippedRules(t)
	tests := ruleTests(t)
	bin := promtool(t)

	for _, a := range alerts {
		rt := tests[a.name]
		if rt == nil {
			continue // TestAlertingRules_EveryAlertIsTestedFiringAndNot says so
		}
		mutations := map[string]func(rule map[string]any){
			"metrics renamed": func(r map[string]any) { r["expr"] = renameMetrics(t, a.expr) },
			"always true":     func(r map[string]any) { r["expr"] = "vector(1)" },
			"never true":      func(r map[string]any) { r["expr"] = "vector(1) == 0" },
			"for a minute longer": func(r map[string]any) {
				r["for"] = shiftDuration(t, a.forDuration, time.Minute)
			},
		}
		if a.forDuration != "" {
			mutations["for a minute shorter"] = func(r map[string]any) { r["for"] = shiftDuration(t, a.forDuration, -time.Minute) }
		}
		for what, mutate := range mutations {
			t.Run(a.name+"/"+what, func(t *testing.T) {
				spec, _ := shippedRules(t)
				mutateAlert(t, spec, a.name, mutate)
				dir := workDir(t, spec, rt.files...)

				out, err := run(t, dir, bin, append([]string{"test", "rules"}, rt.files...)...)

				if err == nil {
					t.Errorf("%s's tests (%v) still pass with the alert's %s:\n%s", a.name, rt.files, what, out)
				}
			})
		}
	}
}

func mutateAlert(t *testing.T, spec map[string]any, name string, mutate func(map[string]any)) {
	t.Helper()
	for _, g := range spec["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if m := r.(map[string]any); m["alert"] == name {
				mutate(m)
				return
			}
		}
	}
	t.Fatalf("no alert %s", name)
}

// renameMetrics appends _renamed to every metric name expr selects.
func renameMetrics(t *testing.T, expr string) string {
	t.Helper()
	names, err := metricsOf(expr)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		expr = regexp.MustCompile(`\b`+regexp.QuoteMeta(n)+`\b`).ReplaceAllString(expr, n+"_renamed")
	}
	return expr
}

func shiftDuration(t *testing.T, d string, by time.Duration) string {
	t.Helper()
	var cur time.Duration
	if d != "" {
		var err error
		if cur, err = time.ParseDuration(d); err != nil {
			t.Fatalf("for: %q: %v", d, err)
		}
	}
	return fmt.Sprintf("%ds", int((cur + by).Seconds()))
}

// The alerts select only metrics DockerIOS registers or that
// externalMetrics names: a renamed metric would otherwise leave an alert
// that never fires, and its tests (written with the same name) passing.
func TestAlertingRules_NameOnlyKnownMetrics(t *testing.T) {
	_, alerts := shippedRules(t)
	registered := registeredMetrics(t)

	for _, a := range alerts {
		names, err := metricsOf(a.expr)
		if err != nil {
			t.Errorf("%s: %v", a.name, err)
			continue
		}
		for _, n := range names {
			if registered[n] == "" && externalMetrics[n] == "" {
				t.Errorf("%s selects %s, which nothing registers", a.name, n)
			}
		}
	}
}

// Every alert's runbook annotation names its own section of docs/operators/alerts.md,
// and every alert section there is for an alert that exists.
func TestAlertingRules_RunbooksAreInTheDocs(t *testing.T) {
	_, alerts := shippedRules(t)
	data, err := os.ReadFile(filepath.Join(root, runbooks))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{} // anchor: heading
	for _, line := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sections[anchor(h)] = strings.TrimSpace(h)
		}
	}

	for _, a := range alerts {
		want := runbooks + "#" + anchor(a.name)
		if got := a.annotations["runbook"]; got != want {
			t.Errorf("%s: runbook annotation %q, want %q", a.name, got, want)
		}
		if sections[anchor(a.name)] != a.name {
			t.Errorf("%s: no section \"## %s\" in %s", a.name, a.name, runbooks)
		}
		for _, k := range []string{"summary", "description"} {
			if s, _ := a.annotations[k].(string); s == "" {
				t.Errorf("%s: no %s annotation", a.name, k)
			}
		}
	}
	for _, h := range sections {
		if strings.HasPrefix(h, "DockerIOS") && !slices.ContainsFunc(alerts, func(a alert) bool { return a.name == h }) {
			t.Errorf("%s has a runbook for %s, which is no alert", runbooks, h)
		}
	}
}

// anchor is the fragment GitHub and most Markdown renderers give a
// heading: lower case, punctuation dropped, spaces as hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
