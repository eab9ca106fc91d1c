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

package machine

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// Install sessions whose agents are silent (nobody installed one yet) say
// nothing about the network: they never make a fault, so startTimeout is
// not suspended for every other machine while people install macOS.
func TestFleetWatch_InstallSessionsAreNoNetworkFault(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sessions  int
		workloads int
		fault     bool
	}{
		{"five silent install sessions, one machine answering", 5, 0, false},
		{"three silent workload machines of four", 0, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			machines := newIndex()
			add := func(name string, install, silent bool) {
				m := testMachine()
				m.Name, m.UID = name, types.UID("uid-"+name)
				if install {
					installSession(m)
				}
				reachable := metav1.Condition{Type: v1alpha1.MachineAgentReachable, Status: metav1.ConditionTrue, Reason: ReasonAgentAnswered}
				if silent {
					reachable = metav1.Condition{Type: v1alpha1.MachineAgentReachable, Status: metav1.ConditionFalse, Reason: ReasonAgentUnreachable}
				}
				m.Status.Conditions = []metav1.Condition{{Type: v1alpha1.MachineVirtualMachineRunning, Status: metav1.ConditionTrue, Reason: ReasonVMIRunning}, reachable}
				require.NoError(t, machines.Add(m))
			}
			for i := range tc.sessions {
				add(fmt.Sprintf("session-%d", i), true, true)
			}
			for i := range tc.workloads {
				add(fmt.Sprintf("silent-%d", i), false, true)
			}
			add("answering", false, false)
			w := NewFleetWatch(dlisters.NewMacOSMachineLister(machines), record.NewFakeRecorder(100), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
			w.Evaluate()
			assert.Equal(t, tc.fault, w.Fault())
		})
	}
}
