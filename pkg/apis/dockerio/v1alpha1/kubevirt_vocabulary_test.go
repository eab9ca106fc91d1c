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

package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// The machine layer speaks KubeVirt's and CDI's vocabulary where it hands
// values straight through to them; these tests pin that, so a rename on
// either side is caught here rather than by a VM that will not start.

func TestDiskBuses_SATAAndVirtioAreKubeVirtBuses(t *testing.T) {
	assert.Equal(t, string(kubevirtv1.DiskBusSATA), string(v1alpha1.DiskBusSATA))
	assert.Equal(t, string(kubevirtv1.DiskBusVirtio), string(v1alpha1.DiskBusVirtio))
	// KubeVirt has no NVMe bus: an nvme system disk is attached as SATA and
	// moved onto an NVMe controller by the DockerIOS domain hook.
	for _, bus := range []kubevirtv1.DiskBus{kubevirtv1.DiskBusSATA, kubevirtv1.DiskBusVirtio, kubevirtv1.DiskBusSCSI, kubevirtv1.DiskBusUSB} {
		assert.NotEqual(t, string(v1alpha1.DiskBusNVMe), string(bus))
	}
}

func TestImageSources_AreCDICloneSources(t *testing.T) {
	// An image's dataSource becomes a DataVolume sourceRef of this kind.
	assert.Equal(t, "DataSource", cdiv1beta1.DataVolumeDataSource)
}
