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

package registrytest

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
)

// The objects below are valid as they reach a strategy: after decoding has
// applied the v1alpha1 defaults. Tests change one thing to prove a rule.

// MachineClass returns a valid MacOSMachineClass named name.
func MachineClass(name string) *dockerio.MacOSMachineClass {
	return &dockerio.MacOSMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "standard"}},
		Spec: dockerio.MacOSMachineClassSpec{
			CPU:              dockerio.CPUSpec{Cores: 4, Model: "Penryn", Features: []dockerio.CPUFeature{{Name: "avx2", Policy: dockerio.CPUFeaturePolicyRequire}}},
			Memory:           ptr.To(resource.MustParse("8Gi")),
			SystemDisk:       dockerio.SystemDiskSpec{Size: resource.MustParse("128Gi"), Bus: dockerio.DiskBusNVMe},
			ImageName:        "sonoma",
			IdentityPoolName: "imacpro",
			SMBIOSModel:      "iMacPro1,1",
			Display:          dockerio.DisplaySpec{Width: 1920, Height: 1080},
			StartTimeout:     &metav1.Duration{Duration: 20 * time.Minute},
		},
	}
}

// Image returns a valid MacOSImage named name.
func Image(name string) *dockerio.MacOSImage {
	return &dockerio.MacOSImage{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"os": "macos"}},
		Spec: dockerio.MacOSImageSpec{
			Source:  dockerio.ImageSource{DataSource: &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "sonoma-14-6"}},
			Release: "14.6",
			BoardID: "Mac-7BA5B2D9E42DDD94",
		},
	}
}

// IdentityPool returns a valid MacOSIdentityPool named name.
func IdentityPool(name string) *dockerio.MacOSIdentityPool {
	return &dockerio.MacOSIdentityPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"fleet": "ci"}},
		Spec:       dockerio.MacOSIdentityPoolSpec{Model: "iMacPro1,1"},
	}
}

// Identity returns a valid MacOSIdentity named name in pool imacpro.
func Identity(name string) *dockerio.MacOSIdentity {
	return &dockerio.MacOSIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"fleet": "ci"}},
		Spec: dockerio.MacOSIdentitySpec{
			PoolName:          "imacpro",
			Model:             "iMacPro1,1",
			SerialNumber:      "C02TM2ZBHX87",
			BoardSerialNumber: "C02717306J9JG361M",
			SystemUUID:        "007076A6-F2A2-4461-BBE5-BAD019F8025A",
			MACAddress:        "00:0A:27:00:00:01",
			ROM:               "000A27000001",
		},
	}
}

// Machine returns a valid MacOSMachine named name in namespace default.
func Machine(name string) *dockerio.MacOSMachine {
	return &dockerio.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"team": "ios"}},
		Spec:       dockerio.MacOSMachineSpec{ClassName: "standard", VMLabels: map[string]string{"app": "builder"}},
	}
}

// MachinePool returns a valid MacOSMachinePool named name in namespace default.
func MachinePool(name string) *dockerio.MacOSMachinePool {
	return &dockerio.MacOSMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"team": "ios"}},
		Spec: dockerio.MacOSMachinePoolSpec{
			ClassName:   "standard",
			Replicas:    ptr.To[int32](2),
			MaxMachines: ptr.To[int32](10),
			Template: dockerio.MacOSMachineTemplate{
				Metadata: dockerio.MachineTemplateMetadata{Labels: map[string]string{"xcode": "16"}},
			},
		},
	}
}

// MachineClaim returns a valid MacOSMachineClaim named name in namespace
// default, asking pool warm.
func MachineClaim(name string) *dockerio.MacOSMachineClaim {
	return &dockerio.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"team": "ios"}},
		Spec: dockerio.MacOSMachineClaimSpec{
			PoolName: "warm",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"xcode": "16"}},
		},
	}
}
