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

// Package ha tests the highly available topology artifacts/ha ships: a
// three-member etcd with peer and client TLS and three apiserver replicas
// on it. The manifests are rendered with the real kubectl and checked for
// wiring; then the same arguments run as processes on this machine (three
// etcd members, three apiserver replicas behind a load balancer of the
// test's, a real kube-apiserver in front), members and replicas are
// killed under a burst of writes, and the replicas are restarted one by
// one under a client loop.
package ha

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The names artifacts/ha gives what it makes.
const (
	etcdName        = "dockerios-etcd"
	apiserverName   = "dockerios-apiserver"
	etcdCA          = "dockerios-etcd-ca"
	apiserverDataPV = "dockerios-apiserver-data"
)

// rendered is what kubectl kustomize made of an overlay.
type rendered []*unstructured.Unstructured

// renderHA renders artifacts/deploy with the ha component (and the
// others named, in that order), as an operator's overlay would, with the
// real kubectl.
func renderHA(t *testing.T, components ...string) rendered {
	t.Helper()
	out, err := kustomize(t, filepath.Join(moduleRoot(t), "artifacts", "deploy"), components...)
	require.NoError(t, err)
	var objs rendered
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
	return objs
}

// kustomize renders an overlay of base with components (artifacts/ha if
// none is named).
func kustomize(t *testing.T, base string, components ...string) ([]byte, error) {
	t.Helper()
	if len(components) == 0 {
		components = []string{"ha"}
	}
	overlay := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(overlay, p)
		require.NoError(t, err)
		return r
	}
	var refs []string
	for _, c := range components {
		refs = append(refs, rel(filepath.Join(moduleRoot(t), "artifacts", c)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"),
		[]byte("resources: ["+rel(base)+"]\ncomponents: ["+strings.Join(refs, ", ")+"]\n"), 0o644))
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = "kubectl"
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", overlay)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(stderr.String())
	}
	return out, nil
}

func (objs rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (objs rendered) get(t *testing.T, kind, name string, into any) {
	t.Helper()
	o := objs.find(kind, name)
	require.NotNil(t, o, "no %s %s", kind, name)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into))
}

func (objs rendered) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	objs.get(t, "Deployment", name, &d)
	return &d
}

func (objs rendered) statefulSet(t *testing.T, name string) *appsv1.StatefulSet {
	t.Helper()
	var s appsv1.StatefulSet
	objs.get(t, "StatefulSet", name, &s)
	return &s
}

func (objs rendered) service(t *testing.T, name string) *corev1.Service {
	t.Helper()
	var s corev1.Service
	objs.get(t, "Service", name, &s)
	return &s
}

// certificate is what the tests read of a cert-manager Certificate.
type certificate struct {
	Spec struct {
		IsCA       bool     `json:"isCA"`
		CommonName string   `json:"commonName"`
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
		Usages     []string `json:"usages"`
		IssuerRef  struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

func (objs rendered) certificate(t *testing.T, name string) *certificate {
	t.Helper()
	var c certificate
	objs.get(t, "Certificate", name, &c)
	return &c
}

// certificateForSecret is the Certificate that writes Secret name.
func (objs rendered) certificateForSecret(t *testing.T, secret string) (string, *certificate) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Certificate" {
			continue
		}
		c := objs.certificate(t, o.GetName())
		if c.Spec.SecretName == secret {
			return o.GetName(), c
		}
	}
	t.Fatalf("no Certificate writes Secret %s", secret)
	return "", nil
}

// arg is the value of --name in args, and whether it is there.
func arg(args []string, name string) (string, bool) {
	for _, a := range args {
		if a == "--"+name {
			return "true", true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// mountedSecret is the Secret mounted at the directory of file in the
// first container of pod, and the key the file is.
func mountedSecret(t *testing.T, pod corev1.PodSpec, file string) (secret, key string) {
	t.Helper()
	dir, key := filepath.Dir(file), filepath.Base(file)
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name {
				require.NotNil(t, v.Secret, "volume %s at %s is a Secret", v.Name, dir)
				return v.Secret.SecretName, key
			}
		}
		t.Fatalf("volume %s (mounted at %s) does not exist", m.Name, dir)
	}
	t.Fatalf("nothing is mounted at %s, where %s is read", dir, file)
	return "", ""
}

func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}
