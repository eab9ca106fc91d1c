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

// Command api-reference writes docs/reference/fields.md, the field-by-field
// reference of dockerios.io/v1alpha1. Every fact in it is read from the code
// rather than restated: fields, types, required lists and descriptions from
// the OpenAPI definitions openapi-gen makes of the Go types (so the Go doc
// comments are the single source of each description), defaults from running
// the v1alpha1 defaulting functions, and scope, resource, short names and
// categories from the registry that serves each kind. hack/update-codegen.sh
// runs it and hack/verify-codegen.sh fails when the committed page is stale.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/openapi"
	"github.com/dockerios/dockerios/pkg/registry/macosidentity"
	identitystorage "github.com/dockerios/dockerios/pkg/registry/macosidentity/storage"
	"github.com/dockerios/dockerios/pkg/registry/macosidentitypool"
	identitypoolstorage "github.com/dockerios/dockerios/pkg/registry/macosidentitypool/storage"
	"github.com/dockerios/dockerios/pkg/registry/macosimage"
	imagestorage "github.com/dockerios/dockerios/pkg/registry/macosimage/storage"
	"github.com/dockerios/dockerios/pkg/registry/macosmachine"
	machinestorage "github.com/dockerios/dockerios/pkg/registry/macosmachine/storage"
	"github.com/dockerios/dockerios/pkg/registry/macosmachineclaim"
	claimstorage "github.com/dockerios/dockerios/pkg/registry/macosmachineclaim/storage"
	"github.com/dockerios/dockerios/pkg/registry/macosmachineclass"
	classstorage "github.com/dockerios/dockerios/pkg/registry/macosmachineclass/storage"
	"github.com/dockerios/dockerios/pkg/registry/macosmachinepool"
	poolstorage "github.com/dockerios/dockerios/pkg/registry/macosmachinepool/storage"
)

// served is a kind as the apiserver serves it. The registry owns scope,
// resource name, short names and categories; the page reads them from there
// so that it says what discovery says.
type served struct {
	kind string
	// scope is the kind's strategy, whose NamespaceScoped the store uses.
	scope interface{ NamespaceScoped() bool }
	// rest is a zero REST of the kind, asked for its short names and categories.
	rest rest.Storage
	// newStorage builds the kind's storage, up to the point where it asks
	// for its REST options, which name the resource it is served as.
	newStorage func(generic.RESTOptionsGetter) error
	// bodyOf, for a type that is not stored, names the subresource it is
	// the request body of; such a type has no scope or resource.
	bodyOf string
}

// kinds is the page's order: that of the table in api.md.
var kinds = []served{
	{kind: "MacOSMachineClass", scope: macosmachineclass.Strategy, rest: &classstorage.REST{},
		newStorage: func(g generic.RESTOptionsGetter) error { _, err := classstorage.NewStorage(g, nil); return err }},
	{kind: "MacOSImage", scope: macosimage.Strategy, rest: &imagestorage.REST{},
		newStorage: func(g generic.RESTOptionsGetter) error { _, err := imagestorage.NewStorage(g); return err }},
	{kind: "MacOSIdentityPool", scope: macosidentitypool.Strategy, rest: &identitypoolstorage.REST{},
		newStorage: func(g generic.RESTOptionsGetter) error { _, err := identitypoolstorage.NewStorage(g, nil); return err }},
	{kind: "MacOSIdentity", scope: macosidentity.Strategy, rest: &identitystorage.REST{},
		newStorage: func(g generic.RESTOptionsGetter) error { _, err := identitystorage.NewStorage(g, nil); return err }},
	{kind: "MacOSMachine", scope: macosmachine.Strategy, rest: &machinestorage.REST{},
		newStorage: func(g generic.RESTOptionsGetter) error { _, err := machinestorage.NewStorage(g, nil, nil); return err }},
	{kind: "MacOSMachinePool", scope: macosmachinepool.Strategy, rest: &poolstorage.REST{},
		newStorage: func(g generic.RESTOptionsGetter) error { _, err := poolstorage.NewStorage(g, nil, nil); return err }},
	{kind: "MacOSMachineClaim", scope: macosmachineclaim.Strategy, rest: &claimstorage.REST{},
		newStorage: func(g generic.RESTOptionsGetter) error {
			_, err := claimstorage.NewStorage(g, claimstorage.Deps{})
			return err
		}},
	{kind: "MacOSMachineBinding", bodyOf: "macosmachineclaims/{name}/bind"},
}

const (
	output       = "docs/reference/fields.md"
	definitionsP = "#/definitions/"
)

func main() {
	out := flag.String("output", output, "the file to write; - for standard output")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintf(os.Stderr, "api-reference: %v\n", err)
		os.Exit(1)
	}
}

func run(out string) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return err
	}
	if out == "-" {
		_, err := os.Stdout.Write(buf.Bytes())
		return err
	}
	// Written only whole, so a failed run never leaves half a page behind.
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// render writes the page.
func render(w io.Writer) error {
	g, err := newGenerator()
	if err != nil {
		return err
	}
	var docs []kindDoc
	for _, k := range kinds {
		d, err := g.kind(k)
		if err != nil {
			return fmt.Errorf("%s: %w", k.kind, err)
		}
		docs = append(docs, d)
	}
	if err := g.checkAnchors(docs); err != nil {
		return err
	}
	writePage(w, docs)
	return nil
}

type generator struct {
	defs map[string]spec.Schema
	// pkg prefixes the definition names of this API's own types; only those
	// are expanded, the rest (ObjectMeta, Condition, Time) are linked.
	pkg string
	// goPkg is the Go package of this API's own types.
	goPkg  string
	scheme *runtime.Scheme
	// specOf names, for a kind's spec or status type, the kind whose section
	// documents it, so a copy of it elsewhere (a machine's class snapshot)
	// links there rather than repeating it.
	specOf map[string]string
}

func newGenerator() (*generator, error) {
	defs := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef(definitionsP + name)
	})
	g := &generator{
		defs:   make(map[string]spec.Schema, len(defs)),
		pkg:    strings.TrimSuffix(v1alpha1.MacOSMachineClass{}.OpenAPIModelName(), "MacOSMachineClass"),
		goPkg:  reflect.TypeOf(v1alpha1.MacOSMachineClass{}).PkgPath(),
		scheme: runtime.NewScheme(),
		specOf: map[string]string{},
	}
	for name, def := range defs {
		// A v2 form, when a definition has one, is the plain type (Quantity
		// as a string) rather than a oneOf.
		if v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			g.defs[name] = v2
			continue
		}
		g.defs[name] = def.Schema
	}
	if err := v1alpha1.AddToScheme(g.scheme); err != nil {
		return nil, err
	}
	for _, k := range kinds {
		if k.bodyOf != "" {
			continue
		}
		root, ok := g.defs[g.pkg+k.kind]
		if !ok {
			return nil, fmt.Errorf("no OpenAPI definition of %s: run hack/update-codegen.sh", k.kind)
		}
		for _, field := range []string{"spec", "status"} {
			if name := refName(root.Properties[field]); name != "" {
				g.specOf[name] = k.kind
			}
		}
	}
	return g, nil
}

// kindDoc is one kind's part of the page.
type kindDoc struct {
	served
	group, version, resource string
	namespaced               bool
	shortNames, categories   []string
	description              string
	sections                 []section
}

// section is the table of one object's fields: the kind's own (path "") or
// those of a struct at a path within it.
type section struct {
	kind, path string
	// typeName and typeDescription describe the struct; empty for the kind.
	typeName, typeDescription string
	rows                      []row
}

type row struct {
	path, typ, def, description string
	required                    bool
}

func (s section) title() string {
	if s.path == "" {
		return s.kind
	}
	return s.kind + " `" + s.path + "`"
}

func (s section) anchor() string { return slug(s.title()) }

func (g *generator) kind(k served) (kindDoc, error) {
	d := kindDoc{served: k, group: v1alpha1.SchemeGroupVersion.Group, version: v1alpha1.SchemeGroupVersion.Version}
	if k.bodyOf == "" {
		d.namespaced = k.scope.NamespaceScoped()
		if p, ok := k.rest.(rest.ShortNamesProvider); ok {
			d.shortNames = p.ShortNames()
		}
		if p, ok := k.rest.(rest.CategoriesProvider); ok {
			d.categories = p.Categories()
		}
		r, err := resourceOf(k.newStorage)
		if err != nil {
			return d, err
		}
		if r.Group != d.group {
			return d, fmt.Errorf("served in group %q, not %q", r.Group, d.group)
		}
		d.resource = r.Resource
	}
	defaults, err := g.defaults(k.kind)
	if err != nil {
		return d, err
	}
	root := g.pkg + k.kind
	d.description = g.defs[root].Description
	sections, err := g.walk(k.kind, "", root, defaults, map[string]bool{})
	if err != nil {
		return d, err
	}
	d.sections = sections
	return d, nil
}

// errStop ends a storage's construction once it has named its resource.
var errStop = errors.New("resource recorded")

// recorder is a RESTOptionsGetter that only records what it is asked for.
type recorder struct{ resource schema.GroupResource }

func (r *recorder) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	r.resource = resource
	return generic.RESTOptions{}, errStop
}

// resourceOf is the resource a storage is served as: the one it asks REST
// options for, as the generic store does with its DefaultQualifiedResource.
func resourceOf(newStorage func(generic.RESTOptionsGetter) error) (schema.GroupResource, error) {
	r := &recorder{}
	if err := newStorage(r); !errors.Is(err, errStop) {
		return schema.GroupResource{}, fmt.Errorf("the storage did not ask for its REST options (got %v); api-reference reads the resource name from that call", err)
	}
	return r.resource, nil
}

// walk makes the section of the struct defName found at path, followed by
// the sections of the structs among its fields, depth first.
func (g *generator) walk(kind, path, defName string, defaults map[string]string, onPath map[string]bool) ([]section, error) {
	def, ok := g.defs[defName]
	if !ok {
		return nil, fmt.Errorf("%s: no OpenAPI definition %s", path, defName)
	}
	onPath[defName] = true
	defer delete(onPath, defName)

	s := section{kind: kind, path: path}
	if path != "" {
		s.typeName = shortName(defName)
		s.typeDescription = def.Description
	}
	required := map[string]bool{}
	for _, r := range def.Required {
		required[r] = true
	}
	names := make([]string, 0, len(def.Properties))
	for name := range def.Properties {
		names = append(names, name)
	}
	// Properties are a map; kubectl explain lists them alphabetically too.
	sort.Strings(names)

	var nested []section
	for _, name := range names {
		prop := def.Properties[name]
		fieldPath := join(path, name)
		r := row{path: fieldPath, required: required[name], description: prop.Description}
		r.def = defaults[fieldPath]
		if r.def == "" {
			r.def = schemaDefault(prop)
		}

		elem, container, childPath := prop, "", fieldPath
		switch {
		case prop.Items != nil && prop.Items.Schema != nil:
			elem, container, childPath = *prop.Items.Schema, "[]", fieldPath+"[]"
		case prop.AdditionalProperties != nil && prop.AdditionalProperties.Schema != nil:
			elem, container, childPath = *prop.AdditionalProperties.Schema, "map[string]", fieldPath+".*"
		}
		ref := refName(elem)
		switch {
		case ref != "" && strings.HasPrefix(ref, g.pkg):
			child := section{kind: kind, path: childPath}
			if owner, ok := g.specOf[ref]; ok && !(owner == kind && path == "") {
				// A copy of another kind's spec: documented there.
				owned := section{kind: owner, path: g.fieldOf(owner, ref)}
				r.typ = fmt.Sprintf("[`%s%s`](#%s)", container, shortName(ref), owned.anchor())
				break
			}
			if onPath[ref] {
				return nil, fmt.Errorf("%s: %s contains itself; api-reference does not render recursive types", fieldPath, shortName(ref))
			}
			r.typ = fmt.Sprintf("[`%s%s`](#%s)", container, shortName(ref), child.anchor())
			sub, err := g.walk(kind, childPath, ref, defaults, onPath)
			if err != nil {
				return nil, err
			}
			nested = append(nested, sub...)
		case ref != "":
			r.typ = g.external(container, ref)
		default:
			r.typ = "`" + container + scalar(elem) + "`"
		}
		r.typ += listSemantics(prop)
		s.rows = append(s.rows, r)
	}
	return append([]section{s}, nested...), nil
}

// fieldOf is the top-level field of kind whose type is defName.
func (g *generator) fieldOf(kind, defName string) string {
	for name, prop := range g.defs[g.pkg+kind].Properties {
		if refName(prop) == defName {
			return name
		}
	}
	return ""
}

// external is the type of a field whose type belongs to another API
// (ObjectMeta, Condition, Time, Quantity): linked to its Go documentation,
// with its JSON type when that is a plain one.
func (g *generator) external(container, ref string) string {
	name := shortName(ref)
	s := "`" + container + name + "`"
	// Kubernetes names its models after the Go package, domain reversed:
	// io.k8s.apimachinery.pkg.apis.meta.v1.Time is k8s.io/apimachinery/pkg/apis/meta/v1.Time.
	if rest, ok := strings.CutPrefix(strings.TrimSuffix(ref, "."+name), "io.k8s."); ok {
		s = fmt.Sprintf("[%s](https://pkg.go.dev/k8s.io/%s#%s)", s, strings.ReplaceAll(rest, ".", "/"), name)
	}
	if def := g.defs[ref]; len(def.Type) == 1 && def.Type[0] != "object" {
		s += ", `" + scalar(def) + "`"
	}
	return s
}

func scalar(s spec.Schema) string {
	if len(s.Type) == 0 {
		if s.Extensions != nil {
			if v, ok := s.Extensions.GetBool("x-kubernetes-int-or-string"); ok && v {
				return "int-or-string"
			}
		}
		return "any"
	}
	t := strings.Join(s.Type, "|")
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	return t
}

// listSemantics says how server-side apply merges a list.
func listSemantics(s spec.Schema) string {
	listType, _ := s.Extensions.GetString("x-kubernetes-list-type")
	switch listType {
	case "map":
		var keys []string
		if raw, ok := s.Extensions["x-kubernetes-list-map-keys"].([]interface{}); ok {
			for _, k := range raw {
				keys = append(keys, fmt.Sprintf("`%v`", k))
			}
		}
		return ", keyed by " + strings.Join(keys, ", ")
	case "set":
		return ", a set"
	}
	return ""
}

// schemaDefault is a default the schema states, unless it is only the Go
// zero value, which openapi-gen states for every field that is not a
// pointer and which says nothing a reader does not know.
func schemaDefault(s spec.Schema) string {
	if s.Default == nil {
		return ""
	}
	v := reflect.ValueOf(s.Default)
	if v.IsZero() || (v.Kind() == reflect.Map && v.Len() == 0) {
		return ""
	}
	b, err := json.Marshal(s.Default)
	if err != nil {
		return ""
	}
	return "`" + string(b) + "`"
}

func refName(s spec.Schema) string {
	return strings.TrimPrefix(s.Ref.String(), definitionsP)
}

func shortName(defName string) string { return defName[strings.LastIndex(defName, ".")+1:] }

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// defaults runs the v1alpha1 defaulting functions on an object of kind
// whose optional structs and lists of structs are present but empty, so that
// defaults that apply inside them show, and returns what they filled in,
// by field path. It is what the server sets when a field is left out.
func (g *generator) defaults(kind string) (map[string]string, error) {
	obj, err := g.scheme.New(v1alpha1.SchemeGroupVersion.WithKind(kind))
	if err != nil {
		return nil, err
	}
	fill(reflect.ValueOf(obj).Elem(), g.goPkg, 0)
	before, err := leaves(obj)
	if err != nil {
		return nil, err
	}
	g.scheme.Default(obj)
	after, err := leaves(obj)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for path, v := range after {
		if before[path] != v {
			out[path] = v
		}
	}
	return out, nil
}

// fill makes every struct of this API reachable from v present: pointers
// to them allocated, lists of them given one element.
func fill(v reflect.Value, pkg string, depth int) {
	if depth > 20 || v.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		ours := func(t reflect.Type) bool { return t.Kind() == reflect.Struct && t.PkgPath() == pkg }
		switch t := f.Type(); {
		case ours(t):
			fill(f, pkg, depth+1)
		case t.Kind() == reflect.Pointer && ours(t.Elem()):
			f.Set(reflect.New(t.Elem()))
			fill(f.Elem(), pkg, depth+1)
		case t.Kind() == reflect.Slice && ours(t.Elem()):
			f.Set(reflect.MakeSlice(t, 1, 1))
			fill(f.Index(0), pkg, depth+1)
		}
	}
}

// leaves is obj's JSON as field path to value, lists written as path[].
func leaves(obj interface{}) (map[string]string, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var doc interface{}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(path string, v interface{})
	walk = func(path string, v interface{}) {
		switch v := v.(type) {
		case map[string]interface{}:
			for k, e := range v {
				walk(join(path, k), e)
			}
		case []interface{}:
			for _, e := range v {
				walk(path+"[]", e)
			}
		case string:
			out[path] = "`" + v + "`"
		default:
			b, _ := json.Marshal(v)
			out[path] = "`" + string(b) + "`"
		}
	}
	walk("", doc)
	return out, nil
}

// slug is GitHub's anchor for a heading: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkAnchors refuses two headings with one anchor: GitHub would number
// the second, and links to it would silently land on the first.
func (g *generator) checkAnchors(docs []kindDoc) error {
	seen := map[string]string{"kinds": "Kinds", "how-to-read-this-page": "How to read this page"}
	for _, d := range docs {
		for _, s := range d.sections {
			if other, ok := seen[s.anchor()]; ok {
				return fmt.Errorf("sections %q and %q have the same anchor #%s", other, s.title(), s.anchor())
			}
			seen[s.anchor()] = s.title()
		}
	}
	return nil
}

const enumIntro = "\n\nPossible enum values:\n"

// cell makes a description fit one table cell: whitespace collapsed,
// characters that GitHub would read as table or HTML syntax escaped, and
// openapi-gen's list of enum values kept as a list.
func cell(desc string) string {
	text, enum, _ := strings.Cut(desc, enumIntro)
	out := escape(strings.Join(strings.Fields(text), " "))
	if enum == "" {
		return out
	}
	var values, meanings []string
	described := false
	for _, line := range strings.Split(enum, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "- ")
		value, meaning, _ := strings.Cut(line, " : ")
		value = "`" + strings.Trim(value, "`\"") + "`"
		values = append(values, value)
		if meaning != "" {
			described = true
			meaning = ": " + escape(strings.Join(strings.Fields(meaning), " "))
		}
		meanings = append(meanings, value+meaning)
	}
	if !described {
		return out + " Values: " + strings.Join(values, ", ") + "."
	}
	return out + "<br>" + strings.Join(meanings, "<br>")
}

func escape(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

func writePage(w io.Writer, docs []kindDoc) {
	p := func(format string, args ...interface{}) { fmt.Fprintf(w, format, args...) }
	p("<!-- Code generated by hack/api-reference. DO NOT EDIT. -->\n\n")
	p("# dockerios.io/v1alpha1 field reference\n\n")
	p("Generated by `hack/api-reference` from the Go types in `pkg/apis/dockerio/v1alpha1`; ")
	p("do not edit it by hand. To change a description, edit the field's doc comment in ")
	p("`types.go` and run `hack/update-codegen.sh`; CI (`hack/verify-codegen.sh`) fails while this page is stale. ")
	p("What the server enforces at write time, and why, is in [api.md](api.md).\n\n")
	p("## How to read this page\n\n")
	p("- **Field** is the path from the object's root, as `kubectl explain` takes it; `[]` marks the items of a list.\n")
	p("- **Type** links a struct to the section listing its fields; types from Kubernetes link to their Go documentation. ")
	p("A list keyed by a field is merged item by item by server-side apply.\n")
	p("- **Required** fields are refused when missing (the OpenAPI `required` list).\n")
	p("- **Default** is what the server fills in when the field is left out, found by running the v1alpha1 defaulting functions.\n")
	p("- Scope, resource, short names and categories are read from the registry that serves each kind, as discovery reports them.\n\n")
	p("## Kinds\n\n")
	p("| Kind | Resource | Scope | Short names | Categories |\n|---|---|---|---|---|\n")
	for _, d := range docs {
		link := fmt.Sprintf("[%s](#%s)", d.kind, d.sections[0].anchor())
		if d.bodyOf != "" {
			p("| %s | body of `%s` | | | |\n", link, d.bodyOf)
			continue
		}
		p("| %s | `%s` | %s | %s | %s |\n", link, d.resource, scopeOf(d.namespaced), codes(d.shortNames), codes(d.categories))
	}
	for _, d := range docs {
		for i, s := range d.sections {
			if i == 0 {
				p("\n## %s\n\n", s.title())
				p("`apiVersion: %s/%s`, `kind: %s`", d.group, d.version, d.kind)
				if d.bodyOf != "" {
					p("; the body of `POST %s`, never stored.\n\n", d.bodyOf)
				} else {
					scope := "cluster-scoped"
					if d.namespaced {
						scope = "namespaced"
					}
					p("; resource `%s`, %s", d.resource, scope)
					if len(d.shortNames) > 0 {
						p(", short names %s", codes(d.shortNames))
					}
					if len(d.categories) > 0 {
						p(", categories %s", codes(d.categories))
					}
					p(".\n\n")
				}
				p("%s\n\n", escape(strings.Join(strings.Fields(d.description), " ")))
			} else {
				p("\n### %s\n\n", s.title())
				p("`%s`: %s\n\n", s.typeName, escape(strings.Join(strings.Fields(s.typeDescription), " ")))
			}
			p("| Field | Type | Required | Default | Description |\n|---|---|---|---|---|\n")
			for _, r := range s.rows {
				req := ""
				if r.required {
					req = "yes"
				}
				p("| `%s` | %s | %s | %s | %s |\n", r.path, r.typ, req, r.def, cell(r.description))
			}
		}
	}
}

func scopeOf(namespaced bool) string {
	if namespaced {
		return "Namespaced"
	}
	return "Cluster"
}

func codes(s []string) string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = "`" + v + "`"
	}
	return strings.Join(out, ", ")
}
