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

// Package leastprivilege proves that what DockerIOS ships grants no more
// than it needs: the controller's RBAC (artifacts/deploy/09-controller.yaml)
// is, verb by verb, what its code calls, and a real kube-apiserver refuses
// its ServiceAccount the rest; the NetworkPolicies of dockerios-system
// (artifacts/deploy/13-networkpolicies.yaml) and the agent network's
// MultiNetworkPolicy (artifacts/network) allow, by a small evaluator of
// their rules, what the design calls for and nothing it forbids, and the
// same manifests are valid for a real kube-apiserver.
package leastprivilege

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/test/framework"
)

func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// doc is one object of a manifest: its kind and name, and its YAML.
type doc struct {
	kind, name, namespace string
	yaml                  []byte
}

// decode reads into out strictly: a field the type does not have (a typo
// in a manifest) fails the test rather than being dropped.
func (d doc) decode(t testing.TB, out any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict(d.yaml, out), "%s %s", d.kind, d.name)
}

func splitDocs(t testing.TB, data []byte) []doc {
	t.Helper()
	var docs []doc
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		raw, err := r.Read()
		if err == io.EOF {
			return docs
		}
		require.NoError(t, err)
		if strings.TrimSpace(stripComments(raw)) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(raw, &u.Object))
		docs = append(docs, doc{kind: u.GetKind(), name: u.GetName(), namespace: u.GetNamespace(), yaml: raw})
	}
}

func stripComments(b []byte) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// readDocs is the objects of one file under the module root.
func readDocs(t testing.TB, rel string) []doc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), rel))
	require.NoError(t, err)
	return splitDocs(t, data)
}

// renderedArtifacts is `kubectl kustomize artifacts/`: DockerIOS with
// the agent network, as `kubectl apply -k artifacts/` installs it.
func renderedArtifacts(t testing.TB) []doc {
	t.Helper()
	k := framework.NewKubectl(t, "")
	r := k.Run("", "kustomize", filepath.Join(moduleRoot(t), "artifacts"))
	require.NoError(t, r.Err, r.Stderr)
	return splitDocs(t, []byte(r.Stdout))
}

func find(t testing.TB, docs []doc, kind, name string) doc {
	t.Helper()
	for _, d := range docs {
		if d.kind == kind && d.name == name {
			return d
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return doc{}
}

func ofKind(docs []doc, kind string) []doc {
	var out []doc
	for _, d := range docs {
		if d.kind == kind {
			out = append(out, d)
		}
	}
	return out
}
