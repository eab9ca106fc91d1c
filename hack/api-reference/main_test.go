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

package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

func page(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, render(&b))
	return b.String()
}

// rows maps each field path on the page to its table row's cells.
func rows(t *testing.T, md string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := splitRow(line)
		path := strings.Trim(cells[1], "`")
		_, dup := out[path]
		require.False(t, dup, "field %s has two rows", path)
		out[path] = cells[1 : len(cells)-1]
	}
	return out
}

// splitRow splits a table row on the pipes the page did not escape.
func splitRow(line string) []string {
	var cells []string
	start := 0
	for i := 0; i < len(line); i++ {
		if line[i] == '|' && (i == 0 || line[i-1] != '\\') {
			cells = append(cells, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(line[start:]))
}

// goPaths is every field path of the Go type t, from its JSON tags, as the
// page should write it. It does not descend into another kind's spec or
// status (a machine's class snapshot), which the page links to instead.
func goPaths(t reflect.Type, prefix string, otherKinds map[reflect.Type]bool) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" && f.Anonymous {
			out = append(out, goPaths(f.Type, prefix, otherKinds)...)
			continue
		}
		path := join(prefix, name)
		out = append(out, path)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice {
			ft, path = ft.Elem(), path+"[]"
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeOf(v1alpha1.MacOSMachine{}).PkgPath() && !otherKinds[ft] {
			out = append(out, goPaths(ft, path, otherKinds)...)
		}
	}
	return out
}

// byKind is rows of each kind's part of the page.
func byKind(t *testing.T, md string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	for _, s := range strings.Split(md, "\n## ")[1:] {
		title, _, _ := strings.Cut(s, "\n")
		out[title] = rows(t, "\n"+s)
	}
	return out
}

func TestPage_EveryGoFieldHasARowUnderItsPath(t *testing.T) {
	kindRows := byKind(t, page(t))
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			obj, err := scheme.New(v1alpha1.SchemeGroupVersion.WithKind(k.kind))
			require.NoError(t, err)
			typ := reflect.TypeOf(obj).Elem()
			// The spec and status types of the other kinds.
			others := map[reflect.Type]bool{}
			for _, o := range kinds {
				if o.kind == k.kind {
					continue
				}
				other, err := scheme.New(v1alpha1.SchemeGroupVersion.WithKind(o.kind))
				require.NoError(t, err)
				for _, f := range []string{"Spec", "Status"} {
					if sf, ok := reflect.TypeOf(other).Elem().FieldByName(f); ok {
						others[sf.Type] = true
					}
				}
			}
			paths := goPaths(typ, "", others)
			require.NotEmpty(t, paths)
			got := kindRows[k.kind]
			for _, p := range paths {
				assert.Contains(t, got, p, "no row for %s.%s", k.kind, p)
			}
			assert.Len(t, got, len(paths), "rows for fields the Go type does not have")
		})
	}
}

func TestPage_MacOSMachineClassSpecFields(t *testing.T) {
	got := byKind(t, page(t))["MacOSMachineClass"]
	typ := reflect.TypeOf(v1alpha1.MacOSMachineClassSpec{})
	require.Positive(t, typ.NumField())
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		assert.Contains(t, got, "spec."+name)
	}
	// What the schema and the defaulters say about a few of them.
	tests := []struct {
		path, typ, required, def string
	}{
		{path: "spec.systemDisk", typ: "[`SystemDiskSpec`](#macosmachineclass-specsystemdisk)", required: "yes"},
		{path: "spec.systemDisk.size", typ: "`Quantity`", required: "yes"},
		{path: "spec.systemDisk.bus", typ: "`string`", def: "`sata`"},
		{path: "spec.memory", def: "`8Gi`"},
		{path: "spec.cpu.features[].policy", def: "`require`"},
		{path: "spec.agentNetwork.port", typ: "`integer (int32)`", def: "`8443`"},
		{path: "spec.hostDevices", typ: "keyed by `name`"},
		{path: "spec.imageName", required: "yes"},
		{path: "spec.smbiosModel", def: "`iMacPro1,1`"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			require.Contains(t, got, tc.path)
			r := got[tc.path]
			assert.Contains(t, r[1], tc.typ)
			assert.Equal(t, tc.required, r[2])
			assert.Equal(t, tc.def, r[3])
		})
	}
}

// docComments reads the doc comment of every field of the structs in
// types.go, markers left out and whitespace collapsed, by Type.Field.
func docComments(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../pkg/apis/dockerio/v1alpha1/types.go", nil, parser.ParseComments)
	require.NoError(t, err)
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, field := range st.Fields.List {
			if len(field.Names) == 0 || field.Doc == nil {
				continue
			}
			var words []string
			for _, line := range strings.Split(field.Doc.Text(), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "+") {
					words = append(words, strings.Fields(line)...)
				}
			}
			out[ts.Name.Name+"."+field.Names[0].Name] = strings.Join(words, " ")
		}
		return false
	})
	return out
}

func TestPage_DescriptionsAreTheGoDocComments(t *testing.T) {
	kindRows := byKind(t, page(t))
	comments := docComments(t)
	tests := []struct{ kind, path, field string }{
		{"MacOSMachineClass", "spec.systemDisk.size", "SystemDiskSpec.Size"},
		{"MacOSMachineClass", "spec.imageName", "MacOSMachineClassSpec.ImageName"},
		{"MacOSMachineClass", "spec.startTimeout", "MacOSMachineClassSpec.StartTimeout"},
		{"MacOSMachineClass", "spec.nodeLostGracePeriod", "MacOSMachineClassSpec.NodeLostGracePeriod"},
		{"MacOSMachineClass", "status.storageHoldBack.probe", "StorageHoldBack.Probe"},
		{"MacOSImage", "spec.checksum", "MacOSImageSpec.Checksum"}, // has < and >, escaped
		{"MacOSMachinePool", "spec.template.spec.imageName", "MachineTemplateSpec.ImageName"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			want := comments[tc.field]
			require.NotEmpty(t, want, "no doc comment on %s", tc.field)
			got := kindRows[tc.kind]
			require.Contains(t, got, tc.path)
			assert.Equal(t, escape(want), got[tc.path][4])
		})
	}
}

func TestCell_KeepsTheTableWhole(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"pipes escaped", "a | b", `a \| b`},
		{"html escaped", "as \"sha256:<64 hex>\"", "as \"sha256:&lt;64 hex&gt;\""},
		{"newlines collapsed", "one\ntwo\n\nthree", "one two three"},
		{"bare enum values", "bus.\n\nPossible enum values:\n - `\"nvme\"`\n - `\"sata\"`", "bus. Values: `nvme`, `sata`."},
		{"described enum values", "phase.\n\nPossible enum values:\n - `\"Bound\"` : has a | machine.\n - `\"Lost\"` : gone.", "phase.<br>`Bound`: has a \\| machine.<br>`Lost`: gone."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, cell(tc.in))
			assert.NotContains(t, cell(tc.in), "\n")
		})
	}
}

func TestPage_IsTheSameOnEveryRun(t *testing.T) {
	first := page(t)
	for i := 0; i < 5; i++ {
		require.Equal(t, first, page(t), "run %d differs: the page depends on map order", i+2)
	}
}

// GitHub's anchors, as it renders these headings.
func TestSlug_IsGitHubsAnchor(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"How to read this page", "how-to-read-this-page"},
		{"MacOSMachineClass", "macosmachineclass"},
		{"MacOSMachineClass `spec.systemDisk`", "macosmachineclass-specsystemdisk"},
		{"MacOSMachineClass `spec.cpu.features[]`", "macosmachineclass-speccpufeatures"},
		{"Rule 4: binding is atomic", "rule-4-binding-is-atomic"},
		{"snake_case and-hyphen", "snake_case-and-hyphen"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, slug(tc.heading), tc.heading)
	}
}

func TestPage_EveryLinkLandsOnAHeading(t *testing.T) {
	md := page(t)
	anchors := map[string]bool{}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "#") {
			anchors[slug(strings.TrimLeft(line, "# "))] = true
		}
	}
	links := regexp.MustCompile(`\]\(#([^)]*)\)`).FindAllStringSubmatch(md, -1)
	require.NotEmpty(t, links)
	for _, l := range links {
		assert.True(t, anchors[l[1]], "link to #%s, which no heading has", l[1])
	}
}

func TestKinds_EveryServedKindIsOnThePage(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	listed := map[string]bool{}
	for _, k := range kinds {
		listed[k.kind] = true
	}
	pkg := reflect.TypeOf(v1alpha1.MacOSMachine{}).PkgPath()
	for kind, typ := range scheme.KnownTypes(v1alpha1.SchemeGroupVersion) {
		if typ.PkgPath() != pkg || strings.HasSuffix(kind, "List") {
			continue
		}
		assert.True(t, listed[kind], "%s is served but not in api-reference's kinds", kind)
	}
}

func TestKinds_ScopeAndNamesComeFromTheRegistry(t *testing.T) {
	md := page(t)
	for _, want := range []string{
		"| [MacOSMachineClass](#macosmachineclass) | `macosmachineclasses` | Cluster | `mmclass` | `dockerios` |",
		"| [MacOSIdentity](#macosidentity) | `macosidentities` | Cluster | `mid` |  |",
		"| [MacOSMachineClaim](#macosmachineclaim) | `macosmachineclaims` | Namespaced | `mmclaim` | `dockerios` |",
	} {
		assert.Contains(t, md, want)
	}
}

func TestPage_SaysItIsGenerated(t *testing.T) {
	md := page(t)
	assert.True(t, strings.HasPrefix(md, "<!-- Code generated by hack/api-reference. DO NOT EDIT. -->\n"))
}
