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

package ledger

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/test/framework"
)

// runArgs runs the apiserver binary with a manifest's arguments and
// returns what it said: a flag the binary does not know fails here, not in
// a cluster at 3 a.m.
func runArgs(t *testing.T, args []string) string {
	t.Helper()
	out, _ := exec.Command(framework.APIServerBinary(t), args...).CombinedOutput()
	s := string(out)
	assert.NotContains(t, s, "unknown flag", "%v", args)
	assert.NotContains(t, s, "unknown command", "%v", args)
	return s
}

func mountsOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, vm := range c.VolumeMounts {
		m[vm.MountPath] = vm.Name
	}
	return m
}

func claims(spec corev1.PodSpec) map[string]string {
	m := map[string]string{}
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			m[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
	}
	return m
}

// The in-cluster restore of the embedded ledger, run as
// docs/operators/backup-restore.md shows it (sed the snapshot and the image in, apply):
// kube-apiserver accepts it in the restricted namespace without a
// PodSecurity warning, it mounts the ledger's two volumes where the
// apiserver does, and the binary takes its arguments (it fails on the
// missing snapshot, not on a flag).
func TestRestoreJob(t *testing.T) {
	root := moduleRoot(t)
	manifest := filepath.Join(root, "artifacts", "ledger", "restore-job.yaml")
	cp := framework.StartKubeAPIServer(t)
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	k.MustRun(t, "", "apply", "-k", filepath.Join(root, "artifacts", "ledger"))

	script := `sed -e "s|SNAPSHOT|ledger-20261203T101500.000Z-r123456.db|" -e "s|ghcr.io/dockerios/dockerios-apiserver|$IMAGE|" "$MANIFEST" | "$KUBECTL" --kubeconfig "$KUBECONFIG" apply --dry-run=server -f -`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "IMAGE=registry.test/dockerios-apiserver@sha256:"+strings.Repeat("0", 64),
		"MANIFEST="+manifest, "KUBECTL="+k.Bin, "KUBECONFIG="+cp.AdminKubeconfig)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "job.batch/dockerios-ledger-restore created (server dry run)")
	assert.NotContains(t, string(out), "Warning", "no PodSecurity warning in the restricted namespace")

	data, err := os.ReadFile(manifest)
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(data, &job))
	spec := job.Spec.Template.Spec
	assert.Equal(t, map[string]string{"data": "dockerios-apiserver-data", "backups": "dockerios-apiserver-backups"}, claims(spec))
	assert.Equal(t, map[string]string{"/var/lib/dockerios": "data", "/var/lib/dockerios-backups": "backups"}, mountsOf(spec.Containers[0]))
	args := append([]string(nil), spec.Containers[0].Args...)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "/var/lib/dockerios-backups/SNAPSHOT", filepath.Join(t.TempDir(), "absent.db"))
	}
	assert.Contains(t, runArgs(t, args), "no such file or directory")
	deployment := deploymentOf(t, kustomize(t, "artifacts/deploy"))
	assert.Contains(t, deployment.Containers[0].Args, "--data-dir=/var/lib/dockerios", "the Job restores where the apiserver keeps its data")
}

func deploymentOf(t *testing.T, objs []*unstructured.Unstructured) corev1.PodSpec {
	t.Helper()
	for _, o := range kinds(objs, "Deployment") {
		if o.GetName() == "dockerios-apiserver" {
			var spec corev1.PodSpec
			raw, _, err := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			require.NoError(t, err)
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec))
			return spec
		}
	}
	t.Fatal("no Deployment dockerios-apiserver")
	return corev1.PodSpec{}
}

// The HA topology's backup CronJob (artifacts/ha-backup), rendered into an
// overlay of artifacts/deploy with the real kubectl: kube-apiserver
// accepts it and its network policies in the restricted namespace, it
// writes into the ledger's backups volume, reads the etcd client
// certificate from the Secret it mounts, and the binary takes its
// arguments (it fails reaching etcd, not on a flag).
func TestHABackupCronJob(t *testing.T) {
	root := moduleRoot(t)
	dir := t.TempDir()
	for _, d := range []string{"deploy", "ha-backup", "ledger"} {
		require.NoError(t, os.CopyFS(filepath.Join(dir, d), os.DirFS(filepath.Join(root, "artifacts", d))))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "overlay"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "overlay", "kustomization.yaml"),
		[]byte("resources: [../deploy]\ncomponents: [../ha-backup]\n"), 0o644))
	r := framework.NewKubectl(t, "").Run("", "kustomize", filepath.Join(dir, "overlay"))
	require.NoError(t, r.Err, r.Stderr)

	cp := framework.StartKubeAPIServer(t)
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	k.MustRun(t, "", "apply", "-k", filepath.Join(root, "artifacts", "ledger"))
	var cronjob batchv1.CronJob
	var policies []string
	for _, doc := range strings.Split(r.Stdout, "\n---\n") {
		if strings.Contains(doc, "kind: CronJob") {
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &cronjob))
			out := k.MustRun(t, doc, "apply", "--dry-run=server", "-f", "-")
			assert.Contains(t, out, "cronjob.batch/dockerios-ledger-backup created (server dry run)")
		}
		if strings.Contains(doc, "kind: NetworkPolicy") && strings.Contains(doc, "backup") {
			out := k.MustRun(t, doc, "apply", "--dry-run=server", "-f", "-")
			policies = append(policies, strings.TrimSpace(out))
		}
	}
	assert.Len(t, policies, 2, "egress to the members and their ingress from the backup")
	require.Equal(t, "dockerios-ledger-backup", cronjob.Name)
	assert.Equal(t, batchv1.ForbidConcurrent, cronjob.Spec.ConcurrencyPolicy)
	spec := cronjob.Spec.JobTemplate.Spec.Template.Spec
	assert.Equal(t, "dockerios-apiserver-backups", claims(spec)["backups"])
	c := spec.Containers[0]
	mounts := mountsOf(c)
	assert.Equal(t, "backups", mounts["/var/lib/dockerios-backups"])
	assert.Equal(t, "etcd-client", mounts["/var/run/dockerios/etcd-client"])
	var secret string
	for _, v := range spec.Volumes {
		if v.Name == "etcd-client" && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	assert.Equal(t, "dockerios-etcd-client", secret)
	for _, f := range []string{"--etcd-cafile=/var/run/dockerios/etcd-client/ca.crt", "--etcd-certfile=/var/run/dockerios/etcd-client/tls.crt",
		"--etcd-keyfile=/var/run/dockerios/etcd-client/tls.key", "--out=/var/lib/dockerios-backups"} {
		assert.Contains(t, c.Args, f)
	}

	// The binary takes the arguments: with a CA, a certificate and a key
	// that are not there, it fails on them.
	args := append([]string(nil), c.Args...)
	for i, a := range args {
		if strings.HasPrefix(a, "--out=") {
			args[i] = "--out=" + t.TempDir()
		}
	}
	assert.Contains(t, runArgs(t, append(args, "--timeout=5s")), "/var/run/dockerios/etcd-client/")
}
