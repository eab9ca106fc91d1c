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

package leastprivilege

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/controller/machine"
)

// The evaluator: NetworkPolicy semantics (networking/v1) as the API
// documents them, and MultiNetworkPolicy's, which are the same for the
// one network its policy-for annotation names. A connection is allowed
// when the source's egress and the destination's ingress both allow it; a
// pod no policy of a direction selects is not isolated in that direction;
// an isolated pod accepts what any rule of any policy selecting it
// allows. Replies belong to their connection.

const (
	podNetwork   = ""
	agentNetwork = "dockerios-system/dockerios-agent"
	// policyForAnnotation names the network a MultiNetworkPolicy is for.
	policyForAnnotation = "k8s.v1.cni.cncf.io/policy-for"
	// networksAnnotation attaches a pod to Multus networks.
	networksAnnotation = "k8s.v1.cni.cncf.io/networks"
)

// endpoint is a pod, or something that is not a pod (host: kube-apiserver
// on a control-plane node's host network), with its addresses.
type endpoint struct {
	name, namespace string
	labels          map[string]string
	ports           []corev1.ContainerPort
	// addrs are its addresses by network (podNetwork, agentNetwork).
	addrs map[string]string
	host  bool
}

// policy is a NetworkPolicy (network podNetwork) or a MultiNetworkPolicy
// (network its policy-for).
type policy struct {
	name, namespace, network string
	spec                     networkingv1.NetworkPolicySpec
}

type world struct {
	namespaces map[string]map[string]string
	endpoints  map[string]*endpoint
	policies   []policy
}

type conn struct {
	src, dst string
	network  string
	proto    corev1.Protocol
	port     int32
}

func (c conn) String() string {
	net := "pod network"
	if c.network != podNetwork {
		net = c.network
	}
	return fmt.Sprintf("%s -> %s %s/%d on %s", c.src, c.dst, c.proto, c.port, net)
}

func (w *world) allowed(t testing.TB, c conn) bool {
	t.Helper()
	src, dst := w.endpoints[c.src], w.endpoints[c.dst]
	require.NotNil(t, src, c.src)
	require.NotNil(t, dst, c.dst)
	require.Contains(t, src.addrs, c.network, "%s is not on that network", c.src)
	require.Contains(t, dst.addrs, c.network, "%s is not on that network", c.dst)
	return w.admits(src, dst, c, networkingv1.PolicyTypeEgress) && w.admits(dst, src, c, networkingv1.PolicyTypeIngress)
}

// admits says whether the policies of self's namespace let the connection
// c with peer through in direction dir.
func (w *world) admits(self, peer *endpoint, c conn, dir networkingv1.PolicyType) bool {
	if self.host {
		return true // not a pod: no policy governs it
	}
	dst := self
	if dir == networkingv1.PolicyTypeEgress {
		dst = peer
	}
	isolated := false
	for _, p := range w.policies {
		if p.network != c.network || p.namespace != self.namespace || !hasType(p.spec, dir) || !matches(&p.spec.PodSelector, self.labels) {
			continue
		}
		isolated = true
		if dir == networkingv1.PolicyTypeIngress {
			for _, r := range p.spec.Ingress {
				if w.peersMatch(p, r.From, peer, c.network) && portsMatch(r.Ports, dst, c.proto, c.port) {
					return true
				}
			}
		} else {
			for _, r := range p.spec.Egress {
				if w.peersMatch(p, r.To, peer, c.network) && portsMatch(r.Ports, dst, c.proto, c.port) {
					return true
				}
			}
		}
	}
	return !isolated
}

func hasType(s networkingv1.NetworkPolicySpec, dir networkingv1.PolicyType) bool {
	if len(s.PolicyTypes) == 0 {
		return dir == networkingv1.PolicyTypeIngress || len(s.Egress) > 0
	}
	return slices.Contains(s.PolicyTypes, dir)
}

func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		panic(err) // the manifests are checked for valid selectors first
	}
	return s.Matches(labels.Set(l))
}

// peersMatch: no peer is every peer; a selector peer is a pod (in the
// policy's namespace without a namespaceSelector) attached to the
// network; an ipBlock is the peer's address on the network.
func (w *world) peersMatch(p policy, peers []networkingv1.NetworkPolicyPeer, e *endpoint, network string) bool {
	if len(peers) == 0 {
		return true
	}
	addr, onNetwork := e.addrs[network]
	for _, peer := range peers {
		if peer.IPBlock != nil {
			if onNetwork && inBlock(peer.IPBlock, addr) {
				return true
			}
			continue
		}
		if e.host || !onNetwork {
			continue
		}
		nsOK := e.namespace == p.namespace
		if peer.NamespaceSelector != nil {
			nsOK = matches(peer.NamespaceSelector, w.namespaces[e.namespace])
		}
		podOK := peer.PodSelector == nil || matches(peer.PodSelector, e.labels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

func inBlock(b *networkingv1.IPBlock, addr string) bool {
	a := netip.MustParseAddr(addr)
	if !netip.MustParsePrefix(b.CIDR).Contains(a) {
		return false
	}
	for _, ex := range b.Except {
		if netip.MustParsePrefix(ex).Contains(a) {
			return false
		}
	}
	return true
}

// portsMatch: no port is every port; a named port is the destination
// pod's container port of that name and protocol.
func portsMatch(ports []networkingv1.NetworkPolicyPort, dst *endpoint, proto corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pp := corev1.ProtocolTCP
		if p.Protocol != nil {
			pp = *p.Protocol
		}
		if pp != proto {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String:
			for _, cp := range dst.ports {
				cproto := cp.Protocol
				if cproto == "" {
					cproto = corev1.ProtocolTCP
				}
				if cp.Name == p.Port.StrVal && cproto == proto && cp.ContainerPort == port {
					return true
				}
			}
		case p.EndPort != nil:
			if port >= p.Port.IntVal && port <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == port:
			return true
		}
	}
	return false
}

// shippedPolicies are the NetworkPolicies and MultiNetworkPolicies of
// `kubectl kustomize artifacts/`, each MultiNetworkPolicy applied in every
// namespace of machines (machineNamespaces), as its comment asks.
func shippedPolicies(t testing.TB, docs []doc, machineNamespaces []string) []policy {
	t.Helper()
	var out []policy
	for _, d := range ofKind(docs, "NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		d.decode(t, &np)
		out = append(out, policy{name: np.Name, namespace: np.Namespace, network: podNetwork, spec: np.Spec})
	}
	for _, d := range ofKind(docs, "MultiNetworkPolicy") {
		mnp := multiNetworkPolicy(t, d)
		network := mnp.Annotations[policyForAnnotation]
		require.NotEmpty(t, network, "MultiNetworkPolicy %s names no network (%s)", mnp.Name, policyForAnnotation)
		for _, ns := range machineNamespaces {
			out = append(out, policy{name: mnp.Name, namespace: ns, network: network, spec: mnp.Spec})
		}
	}
	return out
}

// multiNetworkPolicy reads a MultiNetworkPolicy into networking/v1's
// types: its spec has the same fields and meaning (the
// multi-networkpolicy project's API copies NetworkPolicySpec), and a field
// it does not have fails the strict decode.
func multiNetworkPolicy(t testing.TB, d doc) networkingv1.NetworkPolicy {
	t.Helper()
	var obj struct {
		APIVersion        string `json:"apiVersion"`
		Kind              string `json:"kind"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              networkingv1.NetworkPolicySpec `json:"spec"`
	}
	require.NoError(t, yaml.UnmarshalStrict(d.yaml, &obj), "MultiNetworkPolicy %s", d.name)
	require.Equal(t, "k8s.cni.cncf.io/v1beta1", obj.APIVersion)
	return networkingv1.NetworkPolicy{ObjectMeta: obj.ObjectMeta, Spec: obj.Spec}
}

// deploymentPod is a pod of a rendered Deployment: its labels, ports and
// the Multus networks its annotation attaches it to.
func deploymentPod(t testing.TB, docs []doc, name, podAddr string, multusAddrs map[string]string) *endpoint {
	t.Helper()
	var d appsv1.Deployment
	find(t, docs, "Deployment", name).decode(t, &d)
	e := &endpoint{name: name, namespace: d.Namespace, labels: d.Spec.Template.Labels, addrs: map[string]string{podNetwork: podAddr}}
	for _, c := range d.Spec.Template.Spec.Containers {
		e.ports = append(e.ports, c.Ports...)
	}
	for _, n := range strings.Split(d.Spec.Template.Annotations[networksAnnotation], ",") {
		if n = strings.TrimSpace(n); n != "" {
			require.Contains(t, multusAddrs, n, "%s is attached to %s, which the test world has no address on", name, n)
			e.addrs[n] = multusAddrs[n]
		}
	}
	return e
}

func launcherLabels(uid string) map[string]string {
	return map[string]string{"kubevirt.io": "virt-launcher", machine.MachineUIDLabel: uid, machine.ManagedByLabel: machine.ManagedByValue}
}

// newWorld is DockerIOS as artifacts/ installs it, in a cluster with
// machines in two namespaces, Prometheus, and other workloads.
func newWorld(t testing.TB, docs []doc) *world {
	t.Helper()
	ns := func(name string, l map[string]string) map[string]string {
		out := map[string]string{corev1.LabelMetadataName: name}
		for k, v := range l {
			out[k] = v
		}
		return out
	}
	w := &world{
		namespaces: map[string]map[string]string{
			"dockerios-system": ns("dockerios-system", nil),
			"kube-system":      ns("kube-system", nil),
			"monitoring":       ns("monitoring", map[string]string{"dockerios.io/monitoring": "true"}),
			"observability":    ns("observability", nil),
			"default":          ns("default", nil),
			"team-b":           ns("team-b", nil),
			"other":            ns("other", nil),
		},
		endpoints: map[string]*endpoint{},
	}
	add := func(e *endpoint) { w.endpoints[e.name] = e }
	add(deploymentPod(t, docs, "dockerios-apiserver", "10.244.0.10", nil))
	add(deploymentPod(t, docs, "dockerios-controller", "10.244.0.11", map[string]string{agentNetwork: "10.77.0.2"}))
	add(&endpoint{name: "kube-apiserver", host: true, addrs: map[string]string{podNetwork: "192.168.1.10"}})
	add(&endpoint{name: "kubernetes-service", host: true, addrs: map[string]string{podNetwork: "10.96.0.1"}})
	add(&endpoint{name: "coredns", namespace: "kube-system", labels: map[string]string{"k8s-app": "kube-dns"},
		ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}, addrs: map[string]string{podNetwork: "10.244.1.2"}})
	add(&endpoint{name: "prometheus", namespace: "monitoring", labels: map[string]string{"app.kubernetes.io/name": "prometheus"},
		addrs: map[string]string{podNetwork: "10.244.2.2"}})
	add(&endpoint{name: "prometheus-elsewhere", namespace: "observability", labels: map[string]string{"app.kubernetes.io/name": "prometheus"},
		addrs: map[string]string{podNetwork: "10.244.2.3"}})
	// A machine's virt-launcher pod: its guest on the pod network
	// (masquerade: every port of the pod IP) and on the agent network.
	add(&endpoint{name: "mac-1", namespace: "default", labels: launcherLabels("uid-1"),
		addrs: map[string]string{podNetwork: "10.244.3.2", agentNetwork: "10.77.0.10"}})
	add(&endpoint{name: "mac-2", namespace: "team-b", labels: launcherLabels("uid-2"),
		addrs: map[string]string{podNetwork: "10.244.3.3", agentNetwork: "10.77.0.11"}})
	// A CI runner using its machine over SSH, in the machine's namespace
	// and in another.
	add(&endpoint{name: "runner", namespace: "default", labels: map[string]string{"app": "runner"}, addrs: map[string]string{podNetwork: "10.244.4.2"}})
	add(&endpoint{name: "stranger", namespace: "other", labels: map[string]string{"app": "stranger"}, addrs: map[string]string{podNetwork: "10.244.4.3"}})
	// Someone else's pod that attached itself to the agent network.
	add(&endpoint{name: "intruder", namespace: "other", labels: map[string]string{"app": "intruder"},
		addrs: map[string]string{podNetwork: "10.244.4.4", agentNetwork: "10.77.0.99"}})
	// Someone's pod in dockerios-system labelled as the controller is not
	// modelled: who may create pods there is cluster-admin already.
	w.policies = shippedPolicies(t, docs, []string{"default", "team-b"})
	return w
}

// mutation breaks the policies the way a careless edit would; each case
// names the one that must flip its answer, so every case is shown to rest
// on the rule it claims to.
type mutation struct {
	what  string
	apply func(t testing.TB, ps []policy) []policy
}

func policyIndex(t testing.TB, ps []policy, name string) []int {
	t.Helper()
	var idx []int
	for i, p := range ps {
		if p.name == name {
			idx = append(idx, i)
		}
	}
	require.NotEmpty(t, idx, "no policy %s", name)
	return idx
}

func clone(ps []policy) []policy {
	out := make([]policy, len(ps))
	for i, p := range ps {
		out[i] = p
		out[i].spec = *p.spec.DeepCopy()
	}
	return out
}

// removeRule drops rule i of direction dir from every copy of a policy.
func removeRule(name string, dir networkingv1.PolicyType, i int) mutation {
	return mutation{what: fmt.Sprintf("without %s rule %d of %s", strings.ToLower(string(dir)), i, name), apply: func(t testing.TB, ps []policy) []policy {
		ps = clone(ps)
		for _, j := range policyIndex(t, ps, name) {
			s := &ps[j].spec
			if dir == networkingv1.PolicyTypeIngress {
				require.Greater(t, len(s.Ingress), i)
				s.Ingress = slices.Delete(s.Ingress, i, i+1)
			} else {
				require.Greater(t, len(s.Egress), i)
				s.Egress = slices.Delete(s.Egress, i, i+1)
			}
		}
		return ps
	}}
}

// openPeers makes rule i of a policy allow every peer.
func openPeers(name string, dir networkingv1.PolicyType, i int) mutation {
	return mutation{what: fmt.Sprintf("with %s rule %d of %s open to every peer", strings.ToLower(string(dir)), i, name), apply: func(t testing.TB, ps []policy) []policy {
		ps = clone(ps)
		for _, j := range policyIndex(t, ps, name) {
			s := &ps[j].spec
			if dir == networkingv1.PolicyTypeIngress {
				require.Greater(t, len(s.Ingress), i)
				s.Ingress[i].From = nil
			} else {
				require.Greater(t, len(s.Egress), i)
				s.Egress[i].To = nil
			}
		}
		return ps
	}}
}

// dropType stops a policy isolating its pods in direction dir.
func dropType(name string, dir networkingv1.PolicyType) mutation {
	return mutation{what: fmt.Sprintf("with %s not isolating %s", name, strings.ToLower(string(dir))), apply: func(t testing.TB, ps []policy) []policy {
		ps = clone(ps)
		for _, j := range policyIndex(t, ps, name) {
			require.Contains(t, ps[j].spec.PolicyTypes, dir)
			ps[j].spec.PolicyTypes = slices.DeleteFunc(ps[j].spec.PolicyTypes, func(p networkingv1.PolicyType) bool { return p == dir })
		}
		return ps
	}}
}

// oldAgentPolicy is the pod-network NetworkPolicy artifacts/network
// shipped before: it selected the launcher pods, and so isolated them for
// every port of the pod network, SSH included.
func oldAgentPolicy() mutation {
	return mutation{what: "with the former pod-network agent NetworkPolicy back", apply: func(t testing.TB, ps []policy) []policy {
		var old networkingv1.NetworkPolicy
		require.NoError(t, yaml.UnmarshalStrict([]byte(`
metadata: {name: dockerios-agent-port, namespace: default}
spec:
  podSelector:
    matchExpressions:
    - {key: kubevirt.io, operator: In, values: ["virt-launcher"]}
    - {key: dockerios.io/machine-uid, operator: Exists}
  policyTypes: ["Ingress"]
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: dockerios-system}}
      podSelector: {matchLabels: {app.kubernetes.io/name: dockerios-controller}}
    ports:
    - {protocol: TCP, port: 8443}
`), &old))
		return append(clone(ps), policy{name: old.Name, namespace: old.Namespace, network: podNetwork, spec: old.Spec})
	}}
}

const (
	ingress = networkingv1.PolicyTypeIngress
	egress  = networkingv1.PolicyTypeEgress
	tcp     = corev1.ProtocolTCP
	udp     = corev1.ProtocolUDP
)

func TestNetworkPolicies_AllowWhatTheDesignCallsForAndNothingElse(t *testing.T) {
	// setup
	w := newWorld(t, renderedArtifacts(t))
	const (
		apiserverIngress  = "dockerios-apiserver-ingress"
		controllerIngress = "dockerios-controller-ingress"
		egressPolicy      = "dockerios-egress"
		controllerAgents  = "dockerios-controller-agents"
		defaultDeny       = "dockerios-default-deny"
		agentPolicy       = "dockerios-agent"
	)
	removeAll := func(names ...string) mutation {
		return mutation{what: "without " + strings.Join(names, ", "), apply: func(t testing.TB, ps []policy) []policy {
			for _, n := range names {
				policyIndex(t, ps, n)
			}
			return slices.DeleteFunc(clone(ps), func(p policy) bool { return slices.Contains(names, p.name) })
		}}
	}
	for _, tc := range []struct {
		name string
		conn conn
		want bool
		// flip is the edit of the policies that must turn the answer
		// round: the rule (or the isolation) the answer rests on.
		flip mutation
	}{
		// dockerios-system's ingress.
		{"kube-apiserver reaches the apiserver's secure port", conn{"kube-apiserver", "dockerios-apiserver", podNetwork, tcp, 9443}, true, removeRule(apiserverIngress, ingress, 0)},
		{"any pod reaches the apiserver's secure port (authenticated there)", conn{"stranger", "dockerios-apiserver", podNetwork, tcp, 9443}, true, removeRule(apiserverIngress, ingress, 0)},
		{"nothing else of the apiserver pod is reachable", conn{"stranger", "dockerios-apiserver", podNetwork, tcp, 2379}, false, removeAll(defaultDeny, apiserverIngress)},
		{"kube-apiserver reaches the launcher pod webhook", conn{"kube-apiserver", "dockerios-controller", podNetwork, tcp, 9443}, true, removeRule(controllerIngress, ingress, 0)},
		{"Prometheus in a namespace labelled for monitoring scrapes the controller", conn{"prometheus", "dockerios-controller", podNetwork, tcp, 8081}, true, removeRule(controllerIngress, ingress, 1)},
		{"Prometheus in an unlabelled namespace does not", conn{"prometheus-elsewhere", "dockerios-controller", podNetwork, tcp, 8081}, false, openPeers(controllerIngress, ingress, 1)},
		{"any other pod does not reach the controller's metrics", conn{"stranger", "dockerios-controller", podNetwork, tcp, 8081}, false, openPeers(controllerIngress, ingress, 1)},
		{"no other port of the controller is reachable", conn{"stranger", "dockerios-controller", podNetwork, tcp, 9999}, false, removeAll(defaultDeny, controllerIngress)},
		// dockerios-system's egress.
		{"the controller reaches kube-apiserver's endpoint", conn{"dockerios-controller", "kube-apiserver", podNetwork, tcp, 6443}, true, removeRule(egressPolicy, egress, 1)},
		{"the controller reaches the kubernetes Service", conn{"dockerios-controller", "kubernetes-service", podNetwork, tcp, 443}, true, removeRule(egressPolicy, egress, 1)},
		{"the apiserver reaches kube-apiserver (delegated authn and authz)", conn{"dockerios-apiserver", "kube-apiserver", podNetwork, tcp, 6443}, true, removeRule(egressPolicy, egress, 1)},
		{"the apiserver resolves names", conn{"dockerios-apiserver", "coredns", podNetwork, udp, 53}, true, removeRule(egressPolicy, egress, 0)},
		{"the controller calls pod-network agents", conn{"dockerios-controller", "mac-1", podNetwork, tcp, 8443}, true, removeRule(controllerAgents, egress, 0)},
		{"the controller reaches no other pod", conn{"dockerios-controller", "runner", podNetwork, tcp, 8443}, false, openPeers(controllerAgents, egress, 0)},
		{"the controller reaches no other port of a launcher pod", conn{"dockerios-controller", "mac-1", podNetwork, tcp, 22}, false, removeAll(defaultDeny, egressPolicy, controllerAgents)},
		{"the apiserver calls no agent", conn{"dockerios-apiserver", "mac-1", podNetwork, tcp, 8443}, false, removeAll(defaultDeny, egressPolicy)},
		// The agent network.
		{"the controller reaches a guest's agent on the agent network", conn{"dockerios-controller", "mac-1", agentNetwork, tcp, 8443}, true, removeRule(agentPolicy, ingress, 0)},
		{"... in every namespace of machines", conn{"dockerios-controller", "mac-2", agentNetwork, tcp, 8443}, true, removeRule(agentPolicy, ingress, 0)},
		{"another pod on the agent network does not reach the agent", conn{"intruder", "mac-1", agentNetwork, tcp, 8443}, false, openPeers(agentPolicy, ingress, 0)},
		{"another guest does not reach the agent (neither its egress nor the agent's ingress lets it)", conn{"mac-2", "mac-1", agentNetwork, tcp, 8443}, false,
			both(dropType(agentPolicy, egress), openPeers(agentPolicy, ingress, 0))},
		{"a guest opens nothing on the agent network", conn{"mac-1", "intruder", agentNetwork, tcp, 80}, false, dropType(agentPolicy, egress)},
		{"nothing but the agent port of a guest is open on the agent network", conn{"dockerios-controller", "mac-1", agentNetwork, tcp, 22}, false, dropType(agentPolicy, ingress)},
		// The guests' pod network is left to their namespaces.
		{"a runner in the namespace reaches its guest's SSH", conn{"runner", "mac-1", podNetwork, tcp, 22}, true, oldAgentPolicy()},
		{"a pod of another namespace reaches a guest's SSH", conn{"stranger", "mac-1", podNetwork, tcp, 22}, true, oldAgentPolicy()},
		{"a guest's other services on the pod network stay reachable", conn{"stranger", "mac-2", podNetwork, tcp, 5900}, true, oldAgentPolicyIn("team-b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// execute
			got := w.allowed(t, tc.conn)
			broken := &world{namespaces: w.namespaces, endpoints: w.endpoints, policies: tc.flip.apply(t, w.policies)}
			flipped := broken.allowed(t, tc.conn)

			// assert
			assert.Equal(t, tc.want, got, "%s", tc.conn)
			assert.Equal(t, !tc.want, flipped, "%s %s: the answer does not rest on that rule", tc.conn, tc.flip.what)
		})
	}
}

// both is two mutations at once, for an answer that two rules give.
func both(a, b mutation) mutation {
	return mutation{what: a.what + " and " + b.what, apply: func(t testing.TB, ps []policy) []policy { return b.apply(t, a.apply(t, ps)) }}
}

// oldAgentPolicyIn is oldAgentPolicy in namespace ns.
func oldAgentPolicyIn(ns string) mutation {
	m := oldAgentPolicy()
	return mutation{what: m.what + " in " + ns, apply: func(t testing.TB, ps []policy) []policy {
		out := m.apply(t, ps)
		out[len(out)-1].namespace = ns
		return out
	}}
}

// Every policy selects pods that exist and every named port it allows is
// a port of a pod it selects: a renamed label or port would otherwise
// silently deny (or allow) something else.
func TestNetworkPolicies_SelectRealPodsAndPorts(t *testing.T) {
	w := newWorld(t, renderedArtifacts(t))
	for _, p := range w.policies {
		var selected []*endpoint
		for _, e := range w.endpoints {
			if !e.host && e.namespace == p.namespace && matches(&p.spec.PodSelector, e.labels) {
				if _, on := e.addrs[p.network]; on {
					selected = append(selected, e)
				}
			}
		}
		assert.NotEmpty(t, selected, "policy %s/%s selects no pod", p.namespace, p.name)
		for _, r := range p.spec.Ingress {
			for _, port := range r.Ports {
				if port.Port == nil || port.Port.Type != intstr.String {
					continue
				}
				for _, e := range selected {
					assert.True(t, slices.ContainsFunc(e.ports, func(cp corev1.ContainerPort) bool { return cp.Name == port.Port.StrVal }),
						"policy %s allows port %q, which pod %s does not have", p.name, port.Port.StrVal, e.name)
				}
			}
		}
	}
}
