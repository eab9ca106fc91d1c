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

package ha

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/embed"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/intstr"

	apiserverapp "github.com/dockerios/dockerios/cmd/apiserver/app"
)

// artifacts/ha, alone or with artifacts/cert-manager in either order:
// every name meets what it depends on, the TLS files are mounted where
// the flags read them from Secrets of Certificates of one etcd CA with
// the usages each side needs, the peers list is consistent, three
// replicas of each with budgets and spreading, and graceful shutdown.
func TestHAComponent(t *testing.T) {
	for _, components := range [][]string{{"ha"}, {"ha", "cert-manager"}, {"cert-manager", "ha"}} {
		t.Run(strings.Join(components, "+"), func(t *testing.T) {
			objs := renderHA(t, components...)
			members := checkEtcd(t, objs)
			checkAPIServer(t, objs, members)
			checkNetworkPolicies(t, objs)
		})
	}
}

// The patches test the arguments and volumes they replace: when the
// Deployment changes, the build fails rather than render replicas that
// still keep an embedded etcd each.
func TestHAComponent_RefusesWhatItDoesNotKnow(t *testing.T) {
	for _, change := range [][2]string{
		{"--data-dir=/var/lib/dockerios", "--data-dir=/var/lib/other"},
		{"claimName: dockerios-apiserver-data", "claimName: other"},
		{"type: Recreate", "type: RollingUpdate"},
		{"--backup-keep=48", "--backup-keep=24"},
		{"claimName: dockerios-apiserver-backups", "claimName: other"},
	} {
		t.Run(change[1], func(t *testing.T) {
			deploy := filepath.Join(t.TempDir(), "deploy")
			require.NoError(t, os.CopyFS(deploy, os.DirFS(filepath.Join(moduleRoot(t), "artifacts", "deploy"))))
			path := filepath.Join(deploy, "07-deployment.yaml")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			changed := bytes.Replace(data, []byte(change[0]), []byte(change[1]), 1)
			require.NotEqual(t, data, changed)
			require.NoError(t, os.WriteFile(path, changed, 0o644))
			_, err = kustomize(t, deploy)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "testing value")
		})
	}
}

// member is one etcd member as the manifests name it.
type member struct {
	name                 string
	clientURL, peerURL   string // advertised
	clientHost, peerHost string
}

// checkEtcd checks the StatefulSet, its Service, budget and certificates,
// and returns its members.
func checkEtcd(t *testing.T, objs rendered) []member {
	t.Helper()
	sts := objs.statefulSet(t, etcdName)
	require.NotNil(t, sts.Spec.Replicas)
	assert.EqualValues(t, 3, *sts.Spec.Replicas, "three members: any one may go")
	assert.Equal(t, appsv1.ParallelPodManagement, sts.Spec.PodManagementPolicy, "a member is ready only with a quorum: they start together")
	pod := sts.Spec.Template
	podLabels := labels.Set(pod.Labels)
	assert.True(t, selects(sts.Spec.Selector, podLabels))

	svc := objs.service(t, sts.Spec.ServiceName)
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "the members' own names need a headless Service")
	assert.True(t, svc.Spec.PublishNotReadyAddresses, "members find each other before any is ready")
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels))

	c := pod.Spec.Containers[0]
	port := func(name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		t.Fatalf("etcd has no port %s", name)
		return 0
	}
	clientPort, peerPort, metricsPort := port("client"), port("peer"), port("metrics")
	for _, p := range svc.Spec.Ports {
		if p.Name == "client" || p.Name == "peer" {
			assert.Equal(t, port(p.Name), p.Port, "Service port %s", p.Name)
		}
	}

	// Every flag is etcd's (its own flag set parses them).
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	embed.NewConfig().AddFlags(fs)
	fs.String("initial-cluster-state", "new", "etcdmain's")
	require.NoError(t, fs.Parse(c.Args), "etcd's flags: %v", c.Args)
	assert.Empty(t, fs.Args())

	var podName bool
	for _, e := range c.Env {
		if e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			podName = true
		}
	}
	require.True(t, podName, "$(POD_NAME) is the pod's name")

	get := func(name string) string {
		v, ok := arg(c.Args, name)
		require.True(t, ok, "etcd has --%s", name)
		return v
	}
	initial := map[string]string{}
	for _, e := range strings.Split(get("initial-cluster"), ",") {
		name, u, ok := strings.Cut(e, "=")
		require.True(t, ok, e)
		initial[name] = u
	}
	assert.Len(t, initial, int(*sts.Spec.Replicas), "--initial-cluster names every member")
	assert.Equal(t, "new", get("initial-cluster-state"))
	assert.NotEmpty(t, get("initial-cluster-token"))
	assert.Equal(t, fmt.Sprintf("https://0.0.0.0:%d", clientPort), get("listen-client-urls"))
	assert.Equal(t, fmt.Sprintf("https://0.0.0.0:%d", peerPort), get("listen-peer-urls"))
	assert.Equal(t, fmt.Sprintf("http://0.0.0.0:%d", metricsPort), get("listen-metrics-urls"))

	var members []member
	for i := range int(*sts.Spec.Replicas) {
		name := fmt.Sprintf("%s-%d", sts.Name, i)
		sub := func(v string) string { return strings.ReplaceAll(v, "$(POD_NAME)", name) }
		host := fmt.Sprintf("%s.%s.%s.svc", name, svc.Name, svc.Namespace)
		m := member{name: name, clientHost: host, peerHost: host,
			clientURL: fmt.Sprintf("https://%s:%d", host, clientPort), peerURL: fmt.Sprintf("https://%s:%d", host, peerPort)}
		assert.Equal(t, name, sub(get("name")))
		assert.Equal(t, m.peerURL, initial[name], "--initial-cluster's %s", name)
		assert.Equal(t, m.peerURL, sub(get("initial-advertise-peer-urls")))
		assert.Equal(t, m.clientURL, sub(get("advertise-client-urls")))
		members = append(members, m)
	}

	// TLS: client certificates required on both ports, every file from a
	// Secret of a Certificate of the etcd CA, with the usages its side
	// needs and the names its clients dial.
	assert.Equal(t, "true", get("client-cert-auth"))
	assert.Equal(t, "true", get("peer-client-cert-auth"))
	spec := pod.Spec
	server := tlsFiles(t, objs, spec, get("cert-file"), get("key-file"), get("trusted-ca-file"))
	peer := tlsFiles(t, objs, spec, get("peer-cert-file"), get("peer-key-file"), get("peer-trusted-ca-file"))
	assert.Contains(t, server.Spec.Usages, "server auth")
	assert.Subset(t, peer.Spec.Usages, []string{"server auth", "client auth"}, "a member serves the peer port and dials the others' with one certificate")
	for _, m := range members {
		assert.True(t, covers(server.Spec.DNSNames, m.clientHost), "%s's server certificate covers %s", etcdName, m.clientHost)
		assert.True(t, covers(peer.Spec.DNSNames, m.peerHost), "the peer certificate covers %s", m.peerHost)
	}
	assert.Equal(t, server.Spec.IssuerRef, peer.Spec.IssuerRef, "one CA for the members")
	checkCA(t, objs, server.Spec.IssuerRef.Name)

	// Probes on the plain-HTTP metrics listener; one member per node; a
	// drain takes one at a time.
	for what, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		require.NotNil(t, p, "%s probe", what)
		require.NotNil(t, p.HTTPGet, "%s probe", what)
		assert.Equal(t, intstr.FromString("metrics"), p.HTTPGet.Port, "%s probe", what)
	}
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	require.NotNil(t, spec.Affinity)
	require.NotNil(t, spec.Affinity.PodAntiAffinity)
	anti := spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, anti, 1)
	assert.Equal(t, "kubernetes.io/hostname", anti[0].TopologyKey)
	assert.True(t, selects(anti[0].LabelSelector, podLabels))
	checkBudget(t, objs, etcdName, podLabels)
	return members
}

// checkAPIServer checks the replicas: three, rolling with none
// unavailable, spread, a budget, on every member with the client
// certificate, no embedded etcd or its volume, and a graceful shutdown
// that outlasts the readiness probe.
func checkAPIServer(t *testing.T, objs rendered, members []member) {
	t.Helper()
	d := objs.deployment(t, apiserverName)
	podLabels := labels.Set(d.Spec.Template.Labels)
	require.NotNil(t, d.Spec.Replicas)
	assert.EqualValues(t, 3, *d.Spec.Replicas)
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	require.NotNil(t, d.Spec.Strategy.RollingUpdate)
	assert.Equal(t, intstr.FromInt32(0), *d.Spec.Strategy.RollingUpdate.MaxUnavailable)
	assert.Equal(t, intstr.FromInt32(1), *d.Spec.Strategy.RollingUpdate.MaxSurge)
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	require.NotNil(t, c.ReadinessProbe)
	require.NotNil(t, c.ReadinessProbe.HTTPGet)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	var spread bool
	for _, s := range spec.TopologySpreadConstraints {
		if s.TopologyKey == "kubernetes.io/hostname" && s.WhenUnsatisfiable == corev1.DoNotSchedule && selects(s.LabelSelector, podLabels) {
			spread = true
		}
	}
	assert.True(t, spread, "replicas spread over nodes")
	checkBudget(t, objs, apiserverName, podLabels)

	// The apiserver's own flag set reads the arguments.
	o := apiserverapp.NewOptions(io.Discard, io.Discard)
	fs := pflag.NewFlagSet("apiserver", pflag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse(c.Args), "the apiserver's flags: %v", c.Args)
	assert.False(t, o.EmbedsEtcd())
	_, dataDir := arg(c.Args, "data-dir")
	assert.False(t, dataDir, "no embedded etcd, no --data-dir")
	transport := o.RecommendedOptions.Etcd.StorageConfig.Transport
	var want []string
	for _, m := range members {
		want = append(want, m.clientURL)
	}
	assert.ElementsMatch(t, want, transport.ServerList, "--etcd-servers names every member as it advertises itself")
	client := tlsFiles(t, objs, spec, transport.CertFile, transport.KeyFile, transport.TrustedCAFile)
	assert.Contains(t, client.Spec.Usages, "client auth")
	_, server := objs.certificateForSecret(t, secretOf(t, objs, etcdName, "cert-file"))
	assert.Equal(t, server.Spec.IssuerRef, client.Spec.IssuerRef, "the members trust the CA of the apiserver's client certificate, and it theirs")

	for _, v := range spec.Volumes {
		assert.Nil(t, v.PersistentVolumeClaim, "volume %s: the replicas keep nothing of their own", v.Name)
	}
	assert.Nil(t, objs.find("PersistentVolumeClaim", apiserverDataPV), "no embedded etcd's volume")
	assert.Empty(t, o.Ledger.BackupDir, "no snapshots of an embedded etcd")
	assert.NoError(t, utilerrors.NewAggregate(o.Ledger.Validate(false)), "the ledger's flags with --etcd-servers")
	assert.NoError(t, utilerrors.NewAggregate(o.Shutdown.Validate()))
	// A stopping replica closes its HTTP/1.1 connections answer by answer;
	// HTTP/2's GOAWAY would race the aggregator's requests.
	assert.True(t, o.RecommendedOptions.SecureServing.DisableHTTP2Serving, "--disable-http2-serving")

	// SIGTERM: not ready at once, serving for the delay (longer than the
	// probe's period, so the kubelet sees it), then the requests in
	// flight (at most the 60 s request timeout) and 2 s for watches,
	// all within the grace period.
	assert.Positive(t, o.Shutdown.Delay)
	assert.Greater(t, o.Shutdown.Delay, time.Duration(c.ReadinessProbe.PeriodSeconds)*time.Second)
	require.NotNil(t, spec.TerminationGracePeriodSeconds)
	assert.Greater(t, time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second, o.Shutdown.Delay+62*time.Second)
	assert.True(t, o.Shutdown.SendRetryAfter)
}

// tlsFiles checks that a certificate, its key and a CA are the tls.crt,
// tls.key and ca.crt of one mounted Secret, and returns the Certificate
// that writes it.
func tlsFiles(t *testing.T, objs rendered, pod corev1.PodSpec, cert, key, ca string) *certificate {
	t.Helper()
	secret, k := mountedSecret(t, pod, cert)
	assert.Equal(t, "tls.crt", k, cert)
	s, k := mountedSecret(t, pod, key)
	assert.Equal(t, secret, s, key)
	assert.Equal(t, "tls.key", k, key)
	s, k = mountedSecret(t, pod, ca)
	assert.Equal(t, secret, s, ca)
	assert.Equal(t, "ca.crt", k, ca)
	_, c := objs.certificateForSecret(t, secret)
	assert.False(t, c.Spec.IsCA)
	return c
}

// secretOf is the Secret StatefulSet name's flag reads its file from.
func secretOf(t *testing.T, objs rendered, name, flagName string) string {
	t.Helper()
	sts := objs.statefulSet(t, name)
	v, ok := arg(sts.Spec.Template.Spec.Containers[0].Args, flagName)
	require.True(t, ok)
	s, _ := mountedSecret(t, sts.Spec.Template.Spec, v)
	return s
}

// checkCA checks that Issuer name signs with a CA Certificate's Secret.
func checkCA(t *testing.T, objs rendered, name string) {
	t.Helper()
	var issuer struct {
		Spec struct {
			CA struct {
				SecretName string `json:"secretName"`
			} `json:"ca"`
		} `json:"spec"`
	}
	objs.get(t, "Issuer", name, &issuer)
	require.NotEmpty(t, issuer.Spec.CA.SecretName, "Issuer %s is a CA issuer", name)
	caName, ca := objs.certificateForSecret(t, issuer.Spec.CA.SecretName)
	assert.True(t, ca.Spec.IsCA, "Certificate %s is a CA", caName)
	assert.Equal(t, etcdCA, caName)
	assert.NotNil(t, objs.find("Issuer", ca.Spec.IssuerRef.Name), "the CA's issuer %s", ca.Spec.IssuerRef.Name)
}

// checkBudget checks there is a budget for name's pods that leaves all
// but one of them.
func checkBudget(t *testing.T, objs rendered, name string, podLabels labels.Set) {
	t.Helper()
	var pdb policyv1.PodDisruptionBudget
	objs.get(t, "PodDisruptionBudget", name, &pdb)
	assert.True(t, selects(pdb.Spec.Selector, podLabels), "PodDisruptionBudget %s selects the pods", name)
	require.NotNil(t, pdb.Spec.MaxUnavailable)
	assert.Equal(t, intstr.FromInt32(1), *pdb.Spec.MaxUnavailable)
}

func selects(sel *metav1.LabelSelector, l labels.Set) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(l)
}

// covers says a certificate's DNS names cover host (a wildcard covers one
// label).
func covers(names []string, host string) bool {
	for _, n := range names {
		if n == host {
			return true
		}
		if rest, ok := strings.CutPrefix(n, "*."); ok {
			if _, after, ok := strings.Cut(host, "."); ok && after == rest {
				return true
			}
		}
	}
	return false
}

// checkNetworkPolicies checks, with artifacts/deploy's default deny, that
// the apiserver reaches the members' client port and the members each
// other's peer port, and nothing else of theirs is open to the others.
func checkNetworkPolicies(t *testing.T, objs rendered) {
	t.Helper()
	var policies []networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() == "NetworkPolicy" {
			var p networkingv1.NetworkPolicy
			objs.get(t, "NetworkPolicy", o.GetName(), &p)
			policies = append(policies, p)
		}
	}
	etcd := objs.statefulSet(t, etcdName).Spec.Template
	apiserver := objs.deployment(t, apiserverName).Spec.Template
	controller := objs.deployment(t, "dockerios-controller").Spec.Template
	ports := map[string]int32{}
	for _, p := range etcd.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	allowed := func(from, to corev1.PodTemplateSpec, port int32) bool {
		return admits(policies, to.Labels, from.Labels, networkingv1.PolicyTypeIngress, ports, port) &&
			admits(policies, from.Labels, to.Labels, networkingv1.PolicyTypeEgress, ports, port)
	}
	assert.True(t, allowed(apiserver, etcd, ports["client"]), "apiserver to the members' client port")
	assert.True(t, allowed(etcd, etcd, ports["peer"]), "member to member, peer port")
	assert.False(t, allowed(controller, etcd, ports["client"]), "the controller has no business with etcd")
	assert.False(t, allowed(apiserver, etcd, ports["peer"]), "the apiserver is no peer")
	assert.False(t, allowed(etcd, etcd, ports["client"]), "members talk on the peer port")
}

// admits says whether the policies selecting self (in dockerios-system)
// let a connection from or to peer (in dockerios-system too) on port of
// the etcd pods (ports by name) in direction dir.
func admits(policies []networkingv1.NetworkPolicy, self, peer map[string]string, dir networkingv1.PolicyType, ports map[string]int32, port int32) bool {
	selected := false
	for _, p := range policies {
		if !slices.Contains(p.Spec.PolicyTypes, dir) || !selects(&p.Spec.PodSelector, self) && len(p.Spec.PodSelector.MatchLabels)+len(p.Spec.PodSelector.MatchExpressions) > 0 {
			continue
		}
		selected = true
		type rule struct {
			peers []networkingv1.NetworkPolicyPeer
			ports []networkingv1.NetworkPolicyPort
		}
		var rules []rule
		for _, r := range p.Spec.Ingress {
			if dir == networkingv1.PolicyTypeIngress {
				rules = append(rules, rule{r.From, r.Ports})
			}
		}
		for _, r := range p.Spec.Egress {
			if dir == networkingv1.PolicyTypeEgress {
				rules = append(rules, rule{r.To, r.Ports})
			}
		}
		for _, r := range rules {
			peerOK := len(r.peers) == 0
			for _, q := range r.peers {
				// A namespace selector alone names other namespaces
				// (labelled ones); only a pod selector names pods of
				// dockerios-system.
				if q.NamespaceSelector == nil && q.IPBlock == nil && q.PodSelector != nil && selects(q.PodSelector, peer) {
					peerOK = true
				}
			}
			portOK := len(r.ports) == 0
			for _, rp := range r.ports {
				if rp.Port == nil || rp.Port.Type == intstr.Int && rp.Port.IntVal == port ||
					rp.Port.Type == intstr.String && ports[rp.Port.StrVal] == port {
					portOK = true
				}
			}
			if peerOK && portOK {
				return true
			}
		}
	}
	return !selected
}
