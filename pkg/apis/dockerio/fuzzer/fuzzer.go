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

// Package fuzzer fills dockerios.io objects with random values that a
// round trip through every encoding must preserve.
package fuzzer

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
)

// Funcs returns the fuzzer functions for the dockerios.io group. Fields that
// decoding defaults are always set, so that defaulting on the way back in
// cannot make a round trip look lossy.
var Funcs = func(codecs runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<40)+1, resource.BinarySI)
		},
		func(s *dockerio.MacOSMachineClassSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.CPU.Cores == 0 {
				s.CPU.Cores = 1
			}
			if s.CPU.Model == "" {
				s.CPU.Model = "Penryn"
			}
			for i := range s.CPU.Features {
				if s.CPU.Features[i].Policy == "" {
					s.CPU.Features[i].Policy = dockerio.CPUFeaturePolicyOptional
				}
			}
			if s.Memory == nil {
				m := resource.MustParse("4Gi")
				s.Memory = &m
			}
			if s.SystemDisk.Bus == "" {
				s.SystemDisk.Bus = dockerio.DiskBusSATA
			}
			if s.SMBIOSModel == "" {
				s.SMBIOSModel = "MacPro7,1"
			}
			if s.Display.Width == 0 {
				s.Display.Width = 1280
			}
			if s.Display.Height == 0 {
				s.Display.Height = 800
			}
			if s.AgentNetwork != nil && s.AgentNetwork.Port == 0 {
				s.AgentNetwork.Port = 9443
			}
			if s.StartTimeout == nil {
				s.StartTimeout = &metav1.Duration{Duration: time.Duration(c.Int63n(3600)+1) * time.Second}
			}
			if s.AgentUnresponsiveTimeout == nil {
				s.AgentUnresponsiveTimeout = &metav1.Duration{Duration: time.Duration(c.Int63n(3600)+1) * time.Second}
			}
			if s.NodeLostGracePeriod == nil {
				s.NodeLostGracePeriod = &metav1.Duration{Duration: time.Duration(c.Int63n(3600)) * time.Second}
			}
		},
		func(s *dockerio.MacOSMachinePoolSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.Replicas == nil {
				r := c.Int31()
				s.Replicas = &r
			}
		},
	}
}
