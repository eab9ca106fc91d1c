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

// Command upstream-crds writes KubeVirt's and CDI's CustomResourceDefinitions
// for the kinds DockerIOS makes or reads, at the versions the root go.mod
// pins, for the test harness to install (hack/update-upstream-crds.sh), and
// the Prometheus Operator's for the kinds artifacts/monitoring ships, into
// a subdirectory monitoring/ that the harness does not install (the
// monitoring test does).
//
// It makes them as the upstream projects make the CRDs they install:
//
//   - KubeVirt (hack/generate.sh): controller-gen's crd generator with
//     allowDangerousTypes=true over kubevirt.io/api/core/v1 gives the
//     schema; tools/crd-validation-generator turns backticks in its
//     descriptions into single quotes; virt-operator
//     (pkg/virt-operator/resource/generate/components/crds.go) puts it into
//     the CRD it installs, with the short names, categories, printer
//     columns and subresources restated in kubevirtKinds and the versions
//     of kubevirt.io/api's ApiSupportedVersions.
//   - CDI (hack/update-codegen.sh): controller-gen's crd generator with
//     crdVersions=v1 over pkg/apis/core/... of its API module gives the
//     whole CRD, which cdi-operator installs as it is.
//   - The Prometheus Operator (make generate-crds): controller-gen's crd
//     generator with crdVersions=v1 over its API module's monitoring/v1
//     gives the CRD (names, categories, columns and validation come from
//     the types' markers); its release adds only an
//     operator.prometheus.io/version annotation. DockerIOS builds no
//     code against that module, so the root go.mod does not require it:
//     its version is pinned here (upstream.version).
//
// controller-gen reads the upstream packages in a scratch module that
// requires only the upstream API module, at the pinned version: the
// Kubernetes types the schemas embed (affinity, PersistentVolumeClaimSpec,
// resource quantities) are then those the upstream module requires, as in
// upstream's own build, not those DockerIOS builds with.
//
// virt-operator's part is restated rather than run because its package
// cannot be built from the Go module proxy (docs/contributors/harness.md, "Real schemas").
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// upstream is one project whose CRDs are generated from its API module.
type upstream struct {
	name   string // in the generated files' headers
	module string // the Go module, at the version the root go.mod pins
	// version pins module when the root go.mod does not require it.
	version string
	// dir is the subdirectory of -out the CRDs are written to ("" for
	// -out itself).
	dir string
	// program is the scratch module's main package: it imports what
	// controller-gen reads (so go mod tidy keeps its modules) and may print
	// what wrap needs from the upstream module.
	program string
	// crdOptions and paths are controller-gen's arguments, as upstream
	// passes them.
	crdOptions string
	paths      []string
	plurals    []string // the CRDs to write
	// wrap turns controller-gen's CRD into the one upstream installs; out
	// is what program printed. It returns how, for the header.
	wrap func(crd map[string]any, out []byte) (map[string]any, string, error)
}

var upstreams = []upstream{
	{
		name:   "KubeVirt",
		module: "kubevirt.io/api",
		program: `package main

import (
	"encoding/json"
	"os"

	v1 "kubevirt.io/api/core/v1"
)

func main() {
	if err := json.NewEncoder(os.Stdout).Encode(v1.ApiSupportedVersions); err != nil {
		panic(err)
	}
}
`,
		crdOptions: "crd:allowDangerousTypes=true",
		paths:      []string{"kubevirt.io/api/core/v1"},
		plurals:    []string{"virtualmachines", "virtualmachineinstances"},
		wrap:       wrapKubeVirt,
	},
	{
		name:   "CDI",
		module: "kubevirt.io/containerized-data-importer-api",
		program: `package main

import _ "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

func main() {}
`,
		crdOptions: "crd:crdVersions=v1",
		paths:      []string{"kubevirt.io/containerized-data-importer-api/pkg/apis/core/..."},
		plurals:    []string{"datavolumes", "datasources"},
		wrap: func(crd map[string]any, _ []byte) (map[string]any, string, error) {
			return crd, "the whole CRD as controller-gen writes it, as cdi-operator installs it", nil
		},
	},
	{
		name:    "Prometheus Operator",
		module:  "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring",
		version: "v0.95.2",
		dir:     "monitoring",
		program: `package main

import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

func main() {}
`,
		crdOptions: "crd:crdVersions=v1",
		paths:      []string{"github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"},
		plurals:    []string{"servicemonitors", "prometheusrules"},
		wrap: func(crd map[string]any, _ []byte) (map[string]any, string, error) {
			return crd, "the CRD as controller-gen writes it, which the operator's bundle installs with a version annotation added", nil
		},
	},
}

// kubevirtKind is what virt-operator adds to controller-gen's schema for
// one kind (components.NewVirtualMachineCrd and
// NewVirtualMachineInstanceCrd at the pinned release).
type kubevirtKind struct {
	shortNames []string
	columns    []map[string]any
	// status: VirtualMachineInstances have no status subresource:
	// virt-handler and virt-controller write a VMI's status with the object.
	status bool
}

func column(name, typ, jsonPath, description string, priority int) map[string]any {
	c := map[string]any{"name": name, "type": typ, "jsonPath": jsonPath}
	if description != "" {
		c["description"] = description
	}
	if priority != 0 {
		c["priority"] = priority
	}
	return c
}

var kubevirtKinds = map[string]kubevirtKind{
	"VirtualMachine": {
		shortNames: []string{"vm", "vms"},
		columns: []map[string]any{
			column("Age", "date", ".metadata.creationTimestamp", "", 0),
			column("Status", "string", ".status.printableStatus", "Human Readable Status", 0),
			column("Ready", "string", ".status.conditions[?(@.type=='Ready')].status", "", 0),
		},
		status: true,
	},
	"VirtualMachineInstance": {
		shortNames: []string{"vmi", "vmis"},
		columns: []map[string]any{
			column("Age", "date", ".metadata.creationTimestamp", "", 0),
			column("Phase", "string", ".status.phase", "", 0),
			column("IP", "string", ".status.interfaces[0].ipAddress", "", 0),
			column("NodeName", "string", ".status.nodeName", "", 0),
			column("Ready", "string", ".status.conditions[?(@.type=='Ready')].status", "", 0),
			column("Live-Migratable", "string", ".status.conditions[?(@.type=='LiveMigratable')].status", "", 1),
			column("Paused", "string", ".status.conditions[?(@.type=='Paused')].status", "", 1),
		},
	},
}

func wrapKubeVirt(gen map[string]any, out []byte) (map[string]any, string, error) {
	var versions []map[string]any
	if err := json.Unmarshal(out, &versions); err != nil || len(versions) == 0 {
		return nil, "", fmt.Errorf("ApiSupportedVersions from kubevirt.io/api: %q: %v", out, err)
	}
	spec, _ := gen["spec"].(map[string]any)
	names, _ := spec["names"].(map[string]any)
	genVersions, _ := spec["versions"].([]any)
	kind, _ := names["kind"].(string)
	k, ok := kubevirtKinds[kind]
	if !ok || len(genVersions) != 1 {
		return nil, "", fmt.Errorf("controller-gen's CRD for %q: unexpected kind or %d versions", kind, len(genVersions))
	}
	schema, _ := genVersions[0].(map[string]any)["schema"].(map[string]any)
	openAPI, ok := schema["openAPIV3Schema"].(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("controller-gen's CRD for %s has no schema", kind)
	}
	sanitizeDescriptions(openAPI)
	// Every served version gets the same schema, columns and subresources,
	// as virt-operator's addFieldsToAllVersions and patchValidation give.
	for _, v := range versions {
		v["schema"] = map[string]any{"openAPIV3Schema": openAPI}
		v["additionalPrinterColumns"] = k.columns
		if k.status {
			v["subresources"] = map[string]any{"status": map[string]any{}}
		}
	}
	group, _ := spec["group"].(string)
	plural, _ := names["plural"].(string)
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group, "labels": map[string]any{"kubevirt.io": ""}},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": plural, "singular": names["singular"],
				"shortNames": k.shortNames, "categories": []string{"all"}},
			"versions": versions,
		},
	}
	return crd, "schema as KubeVirt's hack/generate.sh and crd-validation-generator make it; names, versions, " +
		"printer columns and subresources as virt-operator installs it", nil
}

// sanitizeDescriptions turns backticks into single quotes in descriptions
// where KubeVirt's crd-validation-generator does (it embeds the schemas in
// Go raw strings): in the schema, its properties and its items, and not in
// additionalProperties, anyOf and the like.
func sanitizeDescriptions(s map[string]any) {
	if d, ok := s["description"].(string); ok {
		s["description"] = strings.ReplaceAll(d, "`", "'")
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				sanitizeDescriptions(m)
			}
		}
	}
	switch items := s["items"].(type) {
	case map[string]any:
		sanitizeDescriptions(items)
	case []any:
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				sanitizeDescriptions(m)
			}
		}
	}
}

func main() {
	log.SetFlags(0)
	root := flag.String("root", ".", "the DockerIOS repository, whose go.mod pins the upstream API modules")
	out := flag.String("out", "", "the directory to write the CRDs to (its *.yaml files are replaced)")
	controllerGen := flag.String("controller-gen", "", "the controller-gen binary, built from this module")
	flag.Parse()
	if *out == "" || *controllerGen == "" {
		log.Fatal("-out and -controller-gen are required")
	}
	scratch, err := os.MkdirTemp("", "dockerios-upstream-crds")
	if err != nil {
		log.Fatal(err)
	}
	files, err := generate(*root, scratch, *controllerGen)
	_ = os.RemoveAll(scratch)
	if err != nil {
		log.Fatal(err)
	}
	if err := write(*out, files); err != nil {
		log.Fatal(err)
	}
}

func generate(root, scratch, controllerGen string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, u := range upstreams {
		version := u.version
		if version == "" {
			var err error
			if version, err = pinnedVersion(root, u.module); err != nil {
				return nil, err
			}
		}
		dir := filepath.Join(scratch, strings.ReplaceAll(strings.ToLower(u.name), " ", "-"))
		if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
			return nil, err
		}
		// The go line only has to be one every upstream module accepts;
		// the versions of the modules read come from the require alone.
		mod := fmt.Sprintf("module dockerios.invalid/upstream-types\n\ngo 1.24.0\n\nrequire %s %s\n", u.module, version)
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(u.program), 0o644); err != nil {
			return nil, err
		}
		if _, err := run(dir, "go", "mod", "tidy"); err != nil {
			return nil, err
		}
		printed, err := run(dir, "go", "run", ".")
		if err != nil {
			return nil, err
		}
		args := []string{u.crdOptions}
		for _, p := range u.paths {
			args = append(args, "paths="+p)
		}
		args = append(args, "output:crd:dir="+filepath.Join(dir, "out"))
		if _, err := run(dir, controllerGen, args...); err != nil {
			return nil, err
		}
		for _, plural := range u.plurals {
			matches, err := filepath.Glob(filepath.Join(dir, "out", "*_"+plural+".yaml"))
			if err != nil || len(matches) != 1 {
				return nil, fmt.Errorf("%s: controller-gen wrote no single CRD for %s (%v)", u.name, plural, matches)
			}
			data, err := os.ReadFile(matches[0])
			if err != nil {
				return nil, err
			}
			var gen map[string]any
			if err := yaml.Unmarshal(data, &gen); err != nil {
				return nil, fmt.Errorf("%s: %w", matches[0], err)
			}
			md, _ := gen["metadata"].(map[string]any)
			annotations, _ := md["annotations"].(map[string]any)
			genVersion, _ := annotations["controller-gen.kubebuilder.io/version"].(string)
			crd, how, err := u.wrap(gen, printed)
			if err != nil {
				return nil, err
			}
			body, err := yaml.Marshal(crd)
			if err != nil {
				return nil, err
			}
			spec, _ := crd["spec"].(map[string]any)
			names, _ := spec["names"].(map[string]any)
			var b bytes.Buffer
			b.WriteString("# Code generated by hack/update-upstream-crds.sh (hack/upstream-crds); DO NOT EDIT.\n#\n")
			b.WriteString(comment(fmt.Sprintf("%s's %s CustomResourceDefinition, from the Go module %s %s: "+
				"controller-gen %s %s paths=%s; %s.", u.name, names["kind"], u.module, version,
				genVersion, u.crdOptions, strings.Join(u.paths, ","), how)))
			b.Write(body)
			files[filepath.Join(u.dir, filepath.Base(matches[0]))] = b.Bytes()
		}
	}
	return files, nil
}

// comment wraps text into YAML comment lines.
func comment(text string) string {
	var b strings.Builder
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 78 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
	return b.String()
}

// pinnedVersion is the version of module the root go.mod selects.
func pinnedVersion(root, module string) (string, error) {
	data, err := run(root, "go", "list", "-m", "-json", module)
	if err != nil {
		return "", err
	}
	var m struct {
		Version string
		Replace *struct{ Path, Version string }
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", err
	}
	if m.Replace != nil || m.Version == "" {
		return "", fmt.Errorf("%s: the root go.mod must require it at a released version, without a replace", module)
	}
	return m.Version, nil
}

func run(dir, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	// A go.work around the repository must not pull the scratch modules in.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s (in %s): %w\n%s", name, strings.Join(args, " "), dir, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// write replaces the *.yaml files of out and of its subdirectories named
// in upstreams with files (named relative to out).
func write(out string, files map[string][]byte) error {
	var errs []error
	for _, u := range upstreams {
		dir := filepath.Join(out, u.dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		for _, f := range old {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	for name, data := range files {
		errs = append(errs, os.WriteFile(filepath.Join(out, name), data, 0o644))
	}
	return errors.Join(errs...)
}
