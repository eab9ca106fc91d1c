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

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/test/harness"
)

var networkAttachmentDefinitions = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// A class with an agent network: the VM gets a second interface on the
// NetworkAttachmentDefinition, carrying the identity's MAC, and the
// controller reaches the agent at the address KubeVirt reports for that
// interface. For a guest without qemu-guest-agent (macOS) that is
// status.interfaces[name=agent].ipAddress, which virt-handler takes from
// the launcher pod's interface for the network (the address the CNI's
// IPAM gave it, infoSource "domain, multus-status"). The harness's agent
// listens on that address only, so a controller dialing the pod network
// never sees the machine Ready.
func (e *env) testAgentNetwork(t *testing.T) {
	ns := e.namespace(t, "agentnet")
	ctx := context.Background()
	nad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": "dockerios-agent", "namespace": ns},
		"spec": map[string]any{"config": `{"cniVersion": "0.3.1", "name": "dockerios-agent", "type": "bridge", "bridge": "br-dockerios",
  "isGateway": false, "ipam": {"type": "whereabouts", "range": "10.77.0.0/16"}}`},
	}}
	_, err := e.dynamic(t).Resource(networkAttachmentDefinitions).Namespace(ns).Create(ctx, nad, metav1.CreateOptions{})
	require.NoError(t, err)
	e.fleet(t, "agentnet", 1, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.AgentNetwork = &v1alpha1.AgentNetworkSpec{NetworkName: ns + "/dockerios-agent"}
	})
	e.createMachine(t, ns, "mac", "agentnet")
	ready := e.waitMachine(t, ns, "mac", 90*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
	require.NotNil(t, ready.Status.IdentityRef)
	id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, ready.Status.IdentityRef.Name, metav1.GetOptions{})
	require.NoError(t, err)

	obj, err := e.dynamic(t).Resource(harness.VirtualMachineInstanceGVR).Namespace(ns).Get(ctx, ready.Status.VirtualMachineName, metav1.GetOptions{})
	require.NoError(t, err)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, vmi))
	var nets []string
	for _, n := range vmi.Spec.Networks {
		if n.Multus != nil {
			nets = append(nets, n.Name+"="+n.Multus.NetworkName)
		}
	}
	assert.Equal(t, []string{machine.AgentInterface + "=" + ns + "/dockerios-agent"}, nets)

	byName := map[string]kubevirtv1.VirtualMachineInstanceNetworkInterface{}
	for _, i := range vmi.Status.Interfaces {
		byName[i.Name] = i
	}
	agent, pod := byName[machine.AgentInterface], byName[machine.PodInterface]
	require.NotEmpty(t, agent.IP, "KubeVirt reports the agent interface's address: %+v", vmi.Status.Interfaces)
	assert.True(t, strings.EqualFold(id.Spec.MACAddress, agent.MAC), "the agent interface carries the identity's MAC %s, not %s", id.Spec.MACAddress, agent.MAC)
	assert.False(t, strings.EqualFold(id.Spec.MACAddress, pod.MAC), "and the pod interface does not")
	assert.Contains(t, agent.InfoSource, "multus-status")
	assert.NotContains(t, agent.InfoSource, "guest-agent", "macOS runs no qemu-guest-agent")

	addrs := map[v1alpha1.MachineAddressType]string{}
	for _, a := range ready.Status.Addresses {
		addrs[a.Type] = a.Address
	}
	assert.Equal(t, agent.IP, addrs[v1alpha1.MachineAddressAgent])
	assert.Equal(t, pod.IP, addrs[v1alpha1.MachineAddressPod])
	assert.Equal(t, "Answered", condition(ready, "AgentReachable").Reason, "the agent answered on the agent network")
}
