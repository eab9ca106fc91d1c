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
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// The functions here say whether an update of an object KubeVirt or CDI
// writes can change what a reconcile of its machine decides or writes.
// They are defined by what Derive and the reconciler read of the object,
// next to them, so that a new read is not forgotten here: a reconcile for
// an update they call irrelevant would only repeat the previous pass (and
// the periodic resync still brings every machine back).

// VMIUpdateMatters: a VMI's phase once it runs or has ended, what holds a
// starting one up (vmiStarting: not scheduled, failed), its node (node
// loss), its interfaces (the machine's addresses and its agent's), when it
// began running (the agent's poll rate, startTimeout) and the label that
// ties it to its machine. Not KubeVirt's steps on the way (Pending,
// Scheduling, Scheduled: a starting VMI's message does not name them), nor
// the rest of its status (a running VMI's conditions, guest OS info,
// migration state, volume status).
func VMIUpdateMatters(old, new *kubevirtv1.VirtualMachineInstance) bool {
	return vmiStage(old) != vmiStage(new) ||
		old.Status.NodeName != new.Status.NodeName ||
		old.Labels[MachineUIDLabel] != new.Labels[MachineUIDLabel] ||
		!equality.Semantic.DeepEqual(old.Status.Interfaces, new.Status.Interfaces) ||
		!runningSince(old).Equal(runningSince(new))
}

func vmiStage(vmi *kubevirtv1.VirtualMachineInstance) string {
	if vmi.Status.Phase == kubevirtv1.Running {
		return string(kubevirtv1.Running)
	}
	return vmiStarting(vmi)
}

func runningSince(vmi *kubevirtv1.VirtualMachineInstance) time.Time {
	t, _ := VMIRunningSince(vmi)
	return t
}

// DataVolumeUpdateMatters: a DataVolume's end (Succeeded, Failed and what
// it says of the failure) and, while it clones, its progress in the steps
// the machine's status gives it (progressOr). Not CDI's phases on the way
// (CloneScheduled, CloneInProgress, the smart-clone and CSI-clone steps)
// nor its conditions while nothing failed: the status says only that it
// clones, and how far.
func DataVolumeUpdateMatters(old, new *cdiv1.DataVolume) bool {
	return dvStage(old) != dvStage(new)
}

func dvStage(dv *cdiv1.DataVolume) string {
	switch dv.Status.Phase {
	case cdiv1.Succeeded:
		return string(cdiv1.Succeeded)
	case cdiv1.Failed:
		return string(cdiv1.Failed) + dvMessage(dv)
	}
	return progressOr(dv)
}
