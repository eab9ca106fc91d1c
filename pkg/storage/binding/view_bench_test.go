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

package binding

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// BenchmarkPickFromAWarmPool is the view's share of a claim create with a
// small and a large warm pool: taken in the pool's order, it should not
// grow with the pool (a scan of every machine did: 2.5 µs at 50, 47 µs at
// 1,500).
func BenchmarkPickFromAWarmPool(b *testing.B) {
	for _, size := range []int{50, 1500} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			items := make([]dockerio.MacOSMachine, size)
			for i := range items {
				items[i] = dockerio.MacOSMachine{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: fmt.Sprintf("mac-%05d", i), ResourceVersion: strconv.Itoa(10 + i)},
					Spec:       dockerio.MacOSMachineSpec{PoolName: "warm"},
					Status: dockerio.MacOSMachineStatus{Phase: dockerio.MachineReady, Conditions: []metav1.Condition{{
						Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
						LastTransitionTime: metav1.NewTime(time.Unix(1e9+int64(i), 0))}}},
				}
			}
			var v machineView
			v.reset(items)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				m, ok := v.pick("ci", "warm", nil)
				if !ok || m == nil {
					b.Fatal("nothing picked")
				}
				v.done(m, 0)
			}
		})
	}
}
