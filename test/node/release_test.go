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

package node

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dockerios/dockerios/test/framework"
)

// retargetRegistry is where the test's kustomization moves every image,
// as a user mirroring the release into their own registry would.
const retargetRegistry = "localhost/dockerios-mirror"

// Release is one hack/release.sh output: its manifest, the ledger's
// (the namespace and volumes an uninstall leaves) and the images it pins
// (name → ref@digest as hack/images.sh built them).
type Release struct {
	Version  string
	Manifest string
	Ledger   string
	Images   map[string]string
	dir      string
}

func loadRelease(t *testing.T, releaseDir, imagesDir string) *Release {
	t.Helper()
	r := &Release{Manifest: filepath.Join(releaseDir, "dockerios.yaml"), Ledger: filepath.Join(releaseDir, "dockerios-ledger.yaml"), Images: map[string]string{}, dir: imagesDir}
	f, err := os.Open(filepath.Join(imagesDir, "images.txt"))
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 2 {
			r.Images[fields[0]] = fields[1]
		}
	}
	require.NoError(t, s.Err())
	data, err := os.ReadFile(r.Manifest)
	require.NoError(t, err)
	// "# DockerIOS v0.2.0 (<commit>)." is the manifest's first line.
	first, _, _ := strings.Cut(string(data), "\n")
	if _, rest, ok := strings.Cut(first, "# DockerIOS "); ok {
		r.Version, _, _ = strings.Cut(rest, " ")
	}
	require.NotEmpty(t, r.Version, "the release manifest's first line names its version: %q", first)
	return r
}

// digest is the sha256:... of a built image.
func (r *Release) digest(t *testing.T, name string) string {
	t.Helper()
	ref, ok := r.Images[name]
	require.True(t, ok, "images.txt has no %s", name)
	_, d, ok := strings.Cut(ref, "@")
	require.True(t, ok, "images.txt's %s has no digest: %s", name, ref)
	return d
}

// load imports the release's images into the node's containerd under the
// names the retargeted manifest uses (the mirror's name at the same
// digest): the node pulls nothing.
func (r *Release) load(t *testing.T, c *Cluster) {
	t.Helper()
	for name, ref := range r.Images {
		c.importImage(t, filepath.Join(r.dir, name+".tar"))
		tagged, _, _ := strings.Cut(ref, "@")
		c.Ctr(t, "images", "tag", "--force", tagged, fmt.Sprintf("%s/%s@%s", retargetRegistry, name, r.digest(t, name)))
	}
}

// render is the release manifest, unchanged but for a kustomize images:
// retarget of every image to the mirror, digests kept.
func (r *Release) render(t *testing.T, c *Cluster) string {
	t.Helper()
	dir := c.path("kustomize", r.Version)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	data, err := os.ReadFile(r.Manifest)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dockerios.yaml"), data, 0o644))
	var k strings.Builder
	k.WriteString("resources: [dockerios.yaml]\nimages:\n")
	for name := range r.Images {
		fmt.Fprintf(&k, "- name: ghcr.io/dockerios/%s\n  newName: %s/%s\n", name, retargetRegistry, name)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o644))
	rendered := c.Kubectl.MustRun(t, "", "kustomize", dir)
	for name := range r.Images {
		if name == "gitlab-runner-controller" || name == "dockerios-etcd" {
			continue // the example's, and artifacts/ha's: not in the default install
		}
		want := fmt.Sprintf("%s/%s@%s", retargetRegistry, name, r.digest(t, name))
		assert.Contains(t, rendered, "image: "+want, "the retargeted release names %s by the digest built", name)
	}
	assert.NotContains(t, rendered, "ghcr.io/dockerios/", "every image is retargeted, the ones the controller hands out included")
	return rendered
}

// install applies a release as its header says and waits for the API.
func (r *Release) install(t *testing.T, c *Cluster) {
	t.Helper()
	r.load(t, c)
	rendered := r.render(t, c)
	// What is installed now, for the uninstall to delete.
	require.NoError(t, os.WriteFile(c.path("kustomize", "installed.yaml"), []byte(rendered), 0o644))
	// The ledger's namespace and volumes first, as the release's header says.
	c.Kubectl.MustRun(t, "", "apply", "--server-side", "-f", r.Ledger)
	c.Kubectl.MustRun(t, rendered, "apply", "--server-side", "-f", "-")
	c.Kubectl.MustRun(t, "", "wait", "apiservice/v1alpha1.dockerios.io", "--for", "condition=Available", "--timeout=4m")
	c.Kubectl.MustRun(t, "", "-n", systemNamespace, "rollout", "status", "deployment/dockerios-apiserver", "--timeout=3m")
	c.Kubectl.MustRun(t, "", "-n", systemNamespace, "rollout", "status", "deployment/dockerios-controller", "--timeout=3m")
}

const systemNamespace = "dockerios-system"

// localPV offers a local PersistentVolume of the node (a directory of the
// test's), as a cluster's local-storage provisioner would.
func (c *Cluster) localPV(t *testing.T, name, storageClass, size string) string {
	t.Helper()
	dir := c.path("volumes", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	sc := ""
	if storageClass != "" {
		sc = "storageClassName: " + storageClass
	}
	c.Kubectl.MustRun(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %s}
spec:
  capacity: {storage: %s}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  %s
  local: {path: %s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [%s]}]
`, name, size, sc, dir, NodeName), "apply", "-f", "-")
	return dir
}

// TestRelease installs a release on the node, checks it as an
// administrator would, upgrades it to the next one with claims being made
// and released throughout, and uninstalls it the documented way.
func TestRelease(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	current := loadRelease(t, releaseDir(), imagesDir())
	var previous *Release
	if d := os.Getenv("DOCKERIOS_PREVIOUS_RELEASE_DIR"); d != "" {
		previous = loadRelease(t, d, os.Getenv("DOCKERIOS_PREVIOUS_IMAGES_DIR"))
		require.NotEqual(t, previous.Version, current.Version, "the upgrade must be to another version")
	}
	c := StartCluster(t)
	kube, err := kubernetes.NewForConfig(c.Admin)
	require.NoError(t, err)
	// The apiserver's ledger and its backups: local volumes the ledger's
	// claims bind.
	c.localPV(t, "dockerios-apiserver-data", "", "10Gi")
	c.localPV(t, "dockerios-apiserver-backups", "", "10Gi")

	first := current
	if previous != nil {
		first = previous
	}
	start := time.Now()
	first.install(t, c)
	t.Logf("release %s installed and serving in %s", first.Version, time.Since(start).Round(time.Second))

	t.Run("pods run restricted, from the release's images", func(t *testing.T) { checkPods(t, c, kube, first) })
	t.Run("the API is served through the aggregation layer", func(t *testing.T) { checkAPI(t, c, first.Version) })
	t.Run("the controller is leader-elected and its webhook answers kube-apiserver", func(t *testing.T) { checkController(t, c, kube) })
	// Local volumes are Retain and never reused: every machine the pool
	// makes takes one for good. The upgrade's client loop binds (and so
	// replaces) as many machines as come Ready while it runs, which a slow
	// upgrade makes more of; six ran out in a CI run (two replacements
	// waited on Pending PVCs for five minutes).
	fleet := startFleet(t, c, kube, 4, 24)
	if !t.Run("a pool fills, a claim is bound, the bootdisk Job runs for real", func(t *testing.T) { checkFleet(t, fleet, first) }) {
		return
	}
	if previous != nil {
		t.Run("an upgrade loses no claim, identity or binding", func(t *testing.T) { checkUpgrade(t, c, kube, fleet, current) })
		t.Run("pods run restricted, from the new release's images", func(t *testing.T) { checkPods(t, c, kube, current) })
	}
	last := first
	if previous != nil {
		last = current
	}
	t.Run("uninstall, the documented way, keeps the ledger; installing again serves it", func(t *testing.T) { checkUninstall(t, c, fleet, last) })
}

// checkController: one of the two controller replicas holds the leader
// Lease, and kube-apiserver calls the launcher webhook that both serve:
// a virt-launcher pod of a macOS VM gets its OSK Secret mounted into the
// hook sidecar alone (a server-side dry run, so no pod is left).
func checkController(t *testing.T, c *Cluster, kube kubernetes.Interface) {
	ctx := context.Background()
	pods, err := kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=dockerios-controller"})
	require.NoError(t, err)
	framework.Eventually(t, time.Minute, func() string {
		lease, err := kube.CoordinationV1().Leases(systemNamespace).Get(ctx, "dockerios-controller", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		holder := ptrValue(lease.Spec.HolderIdentity)
		for _, p := range pods.Items {
			if strings.HasPrefix(holder, p.Name) {
				return ""
			}
		}
		return fmt.Sprintf("Lease %s/dockerios-controller is held by %q, none of the controller's pods", systemNamespace, holder)
	})

	c.Kubectl.MustRun(t, `apiVersion: v1
kind: Namespace
metadata: {name: launchers}
---
apiVersion: v1
kind: Secret
metadata: {name: dockerios-osk, namespace: launchers}
stringData: {osk: dummy-osk-for-tests-only-0123456789abcdef0123456789abcdef0123}
`, "apply", "-f", "-")
	out := c.Kubectl.MustRun(t, `apiVersion: v1
kind: Pod
metadata:
  name: virt-launcher-mac
  namespace: launchers
  labels: {kubevirt.io: virt-launcher, hook.dockerios.io/osk-secret: dockerios-osk}
spec:
  volumes: [{name: hook-sidecar-sockets, emptyDir: {}}]
  containers:
  - name: compute
    image: registry.example/virt-launcher:v1
    volumeMounts: [{name: hook-sidecar-sockets, mountPath: /var/run/kubevirt-hooks}]
  - name: hook-sidecar-0
    image: registry.example/dockerios/sidecar-hook:v1
    args: ["--osk-file=/var/run/dockerios/osk/osk"]
    volumeMounts: [{name: hook-sidecar-sockets, mountPath: /var/run/kubevirt-hooks}]
`, "create", "--dry-run=server", "-o", "json", "-f", "-")
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal([]byte(out), &pod))
	var osk *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == "dockerios-osk" {
			osk = &pod.Spec.Volumes[i]
		}
	}
	require.NotNil(t, osk, "the webhook added the OSK volume: %+v", pod.Spec.Volumes)
	require.NotNil(t, osk.Secret)
	assert.Equal(t, "dockerios-osk", osk.Secret.SecretName)
	mounts := func(c corev1.Container) []string {
		var out []string
		for _, m := range c.VolumeMounts {
			if m.Name == osk.Name {
				out = append(out, m.MountPath)
			}
		}
		return out
	}
	assert.Empty(t, mounts(pod.Spec.Containers[0]), "the compute container does not see the key")
	assert.Equal(t, []string{"/var/run/dockerios/osk"}, mounts(pod.Spec.Containers[1]), "the hook sidecar mounts the key where its --osk-file reads it")
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkPods: every DockerIOS pod Running and Ready (probes passing) with
// no restart, in a namespace that enforces PodSecurity restricted, with
// the manifests' securityContext, from the image digests built.
func checkPods(t *testing.T, c *Cluster, kube kubernetes.Interface, r *Release) {
	ctx := context.Background()
	ns, err := kube.CoreV1().Namespaces().Get(ctx, systemNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	want := map[string]int{"dockerios-apiserver": 1, "dockerios-controller": 2}
	// rollout status has seen every pod Available once. A pod not Ready
	// just after is most likely one whose container has since exited:
	// readiness otherwise takes three failed probes, 30 s, to drop. Give
	// the kubelet the time to restart it (the restart count below fails
	// the check then), and show why it exited while its pod is still there.
	var pods *corev1.PodList
	complaint := "not listed yet"
	for deadline := time.Now().Add(time.Minute); complaint != "" && time.Now().Before(deadline); time.Sleep(time.Second) {
		pods, err = kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		complaint = notAllReady(pods, want)
	}
	if complaint != "" || restarted(pods) {
		t.Logf("DockerIOS's pods: %s", cmp.Or(complaint, "a container restarted"))
		res := c.Kubectl.Run("", "-n", systemNamespace, "describe", "pods")
		t.Logf("kubectl describe pods:\n%s%s", res.Stdout, res.Stderr)
		c.logPodLogs(t, systemNamespace, 60)
	}
	got := map[string]int{}
	for _, p := range pods.Items {
		app := p.Labels["app.kubernetes.io/name"]
		got[app]++
		assert.Equal(t, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
		assert.True(t, podReady(&p), "pod %s is Ready (its readiness probe passes)", p.Name)
		assert.Equal(t, "system-cluster-critical", p.Spec.PriorityClassName, "pod %s", p.Name)
		psc := p.Spec.SecurityContext
		require.NotNil(t, psc, "pod %s", p.Name)
		assert.True(t, psc.RunAsNonRoot != nil && *psc.RunAsNonRoot, "pod %s runs as non-root", p.Name)
		require.NotNil(t, psc.SeccompProfile, "pod %s", p.Name)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
		for _, ctr := range p.Spec.Containers {
			sc := ctr.SecurityContext
			require.NotNil(t, sc, "container %s/%s", p.Name, ctr.Name)
			assert.False(t, *sc.AllowPrivilegeEscalation)
			assert.True(t, *sc.ReadOnlyRootFilesystem)
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
			assert.NotNil(t, ctr.ReadinessProbe, "container %s/%s has a readiness probe", p.Name, ctr.Name)
			assert.NotNil(t, ctr.LivenessProbe, "container %s/%s has a liveness probe", p.Name, ctr.Name)
			assert.Equal(t, fmt.Sprintf("%s/%s@%s", retargetRegistry, app, r.digest(t, app)), ctr.Image)
			assert.False(t, ctr.Resources.Requests.Cpu().IsZero(), "container %s/%s requests CPU", p.Name, ctr.Name)
			assert.False(t, ctr.Resources.Requests.Memory().IsZero(), "container %s/%s requests memory", p.Name, ctr.Name)
			assert.False(t, ctr.Resources.Limits.Memory().IsZero(), "container %s/%s has a memory limit", p.Name, ctr.Name)
		}
		for _, st := range p.Status.ContainerStatuses {
			assert.Zero(t, st.RestartCount, "container %s/%s restarted: %+v", p.Name, st.Name, st.LastTerminationState)
			assert.Contains(t, st.ImageID, r.digest(t, app), "container %s/%s runs the image built", p.Name, st.Name)
		}
	}
	assert.Equal(t, want, got, "DockerIOS's pods by app")

	// A drain may take one controller replica at a time.
	framework.Eventually(t, time.Minute, func() string {
		pdb, err := kube.PolicyV1().PodDisruptionBudgets(systemNamespace).Get(ctx, "dockerios-controller", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if pdb.Status.CurrentHealthy != 2 || pdb.Status.DisruptionsAllowed != 1 {
			return fmt.Sprintf("PodDisruptionBudget dockerios-controller: %d healthy, %d disruptions allowed", pdb.Status.CurrentHealthy, pdb.Status.DisruptionsAllowed)
		}
		return ""
	})

	// Enforced, not merely labelled: each Deployment's own pod template
	// passes PodSecurity restricted in a server-side dry run, and fails
	// it with its seccomp profile taken away.
	for _, name := range []string{"dockerios-apiserver", "dockerios-controller"} {
		d, err := kube.AppsV1().Deployments(systemNamespace).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-dry-run-", Namespace: systemNamespace}, Spec: d.Spec.Template.Spec}
		_, err = kube.CoreV1().Pods(systemNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		assert.NoError(t, err, "%s's pod template under PodSecurity restricted", name)
		pod.Spec.SecurityContext.SeccompProfile = nil
		_, err = kube.CoreV1().Pods(systemNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if assert.Error(t, err, "%s's pod template without its seccomp profile", name) {
			assert.Contains(t, err.Error(), `violates PodSecurity "restricted:latest"`)
		}
	}
	// And a plain pod is refused.
	res := c.Kubectl.Run(`apiVersion: v1
kind: Pod
metadata: {name: not-restricted, namespace: dockerios-system}
spec:
  containers: [{name: c, image: `+pauseImage+`}]
`, "create", "-f", "-")
	require.Error(t, res.Err)
	assert.Contains(t, res.Stderr, `violates PodSecurity "restricted:latest"`)
}

// notAllReady says which of want's pods (counted by app) are missing, or
// not Running and Ready; "" when none.
func notAllReady(pods *corev1.PodList, want map[string]int) string {
	got := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || !podReady(&p) {
			return fmt.Sprintf("pod %s is %s, Ready %v", p.Name, p.Status.Phase, podReady(&p))
		}
		got[p.Labels["app.kubernetes.io/name"]]++
	}
	if !maps.Equal(got, want) {
		return fmt.Sprintf("pods by app: %v, want %v", got, want)
	}
	return ""
}

// restarted says whether a container of pods has restarted.
func restarted(pods *corev1.PodList) bool {
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount > 0 {
				return true
			}
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkAPI: the APIService is Available and kubectl's reads of machines
// and claims are answered by the apiserver pod through kube-apiserver's
// aggregation layer.
func checkAPI(t *testing.T, c *Cluster, version string) {
	out := c.Kubectl.MustRun(t, "", "get", "apiservice", "v1alpha1.dockerios.io", "-o", "json")
	var svc struct {
		Spec struct {
			CABundle []byte `json:"caBundle"`
		} `json:"spec"`
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &svc))
	assert.NotEmpty(t, svc.Spec.CABundle, "the apiserver filled its APIService's caBundle")
	assert.Equal(t, version, servedVersion(t, c), "the apiserver's /version is the release's")
	r := c.Kubectl.Run("", "get", "mm,mmclaim", "-A")
	require.NoError(t, r.Err, r.Stderr)
	assert.Contains(t, r.Stderr, "No resources found")
	framework.Eventually(t, time.Minute, func() string {
		if r := c.Kubectl.Run("", "api-resources", "--api-group=dockerios.io"); r.Err != nil || !strings.Contains(r.Stdout, "macosmachines") {
			return "dockerios.io is not discovered: " + r.Stdout + r.Stderr
		}
		return ""
	})
}

// servedVersion is the gitVersion the apiserver pod's /version answers,
// asked through kube-apiserver's Service proxy.
func servedVersion(t *testing.T, c *Cluster) string {
	t.Helper()
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	var out string
	framework.Eventually(t, time.Minute, func() string {
		r := c.Kubectl.Run("", "get", "--raw", "/api/v1/namespaces/"+systemNamespace+"/services/https:dockerios-apiserver:443/proxy/version")
		if r.Err != nil {
			return "GET /version: " + r.Stderr
		}
		out = r.Stdout
		return ""
	})
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	return v.GitVersion
}
