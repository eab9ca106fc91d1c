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

package validation

import (
	"testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

func TestValidateGoldenImage(t *testing.T) {
	recovery := func(release, board string) func(*dockerio.MacOSImage) {
		return func(img *dockerio.MacOSImage) {
			img.Spec.Source.Recovery = &dockerio.RecoverySource{Release: release, BoardID: board}
		}
	}
	and := func(fs ...func(*dockerio.MacOSImage)) func(*dockerio.MacOSImage) {
		return func(img *dockerio.MacOSImage) {
			for _, f := range fs {
				f(img)
			}
		}
	}
	release := func(r string) func(*dockerio.MacOSImage) {
		return func(img *dockerio.MacOSImage) { img.Spec.Release = r }
	}
	cases := map[string]struct {
		mutate func(*dockerio.MacOSImage)
		want   []fieldErr
	}{
		"recovery of the image's release is accepted": {mutate: recovery("sonoma", "")},
		"recovery with a board that runs the release is accepted": {
			mutate: recovery("sonoma", "Mac-827FAC58A8FDFA22"),
		},
		"recovery by release name, image release by name": {
			mutate: and(recovery("sequoia", ""), release("sequoia")),
		},
		"recovery without a release is Required": {
			mutate: recovery("", ""),
			want:   []fieldErr{required("spec.source.recovery.release")},
		},
		"recovery of an unknown release is NotSupported": {
			mutate: recovery("kodiak", ""),
			want:   []fieldErr{notSupported("spec.source.recovery.release")},
		},
		"recovery release spelt as a title is NotSupported (the script's names only)": {
			mutate: recovery("Sonoma", ""),
			want:   []fieldErr{notSupported("spec.source.recovery.release")},
		},
		"image release of another release than the recovery is Invalid at spec.release": {
			mutate: and(recovery("sequoia", ""), release("14.6")),
			want:   []fieldErr{invalid("spec.release")},
		},
		"image release the tables do not know, with recovery, is Invalid at spec.release": {
			mutate: and(recovery("sonoma", ""), release("latest beta")),
			want:   []fieldErr{invalid("spec.release")},
		},
		"recovery board of a model that does not run the release is Invalid": {
			// An iMac Pro runs up to 15.7.4; Tahoe is 26.
			mutate: and(recovery("tahoe", "Mac-7BA5B2D9E42DDD94"), release("tahoe"), func(img *dockerio.MacOSImage) { img.Spec.BoardID = "" }),
			want:   []fieldErr{invalid("spec.source.recovery.boardID")},
		},
		"recovery board that is not a board-id is Invalid": {
			mutate: recovery("sonoma", "Mac-123"),
			want:   []fieldErr{invalid("spec.source.recovery.boardID")},
		},
		"recovery with a pvc source (no DataSource to publish through) is Required at dataSource": {
			mutate: and(recovery("sonoma", ""), func(img *dockerio.MacOSImage) {
				img.Spec.Source.DataSource = nil
				img.Spec.Source.PVC = &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "x"}
			}),
			want: []fieldErr{required("spec.source.dataSource")},
		},
		"image boardID of a model that cannot run the release is Invalid": {
			mutate: and(release("26.1"), func(img *dockerio.MacOSImage) { img.Spec.BoardID = "Mac-7BA5B2D9E42DDD94" }),
			want:   []fieldErr{invalid("spec.boardID")},
		},
		"image boardID the table does not know has no opinion": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.BoardID = "Mac-0000000000000000" },
		},
		"promoteFrom an install session is accepted": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Spec.PromoteFrom = &dockerio.NamespacedObjectReference{Namespace: "builds", Name: "sonoma-install-x7k2p"}
			},
		},
		"promoteFrom without a namespace is Required": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Spec.PromoteFrom = &dockerio.NamespacedObjectReference{Name: "sonoma-install-x7k2p"}
			},
			want: []fieldErr{required("spec.promoteFrom.namespace")},
		},
		"promoteFrom with a pvc source is Required at dataSource": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Spec.Source = dockerio.ImageSource{PVC: &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "x"}}
				img.Spec.PromoteFrom = &dockerio.NamespacedObjectReference{Namespace: "builds", Name: "m"}
			},
			want: []fieldErr{required("spec.source.dataSource")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			img := registrytest.Image("sonoma")
			tc.mutate(img)
			assertErrors(t, tc.want, ValidateMacOSImage(img))
		})
	}
}

func TestValidateImageStatus(t *testing.T) {
	cases := map[string]struct {
		status dockerio.MacOSImageStatus
		want   []fieldErr
	}{
		"recovery progress and a promotion are accepted": {status: dockerio.MacOSImageStatus{
			Recovery:  &dockerio.RecoveryStatus{BytesDone: 10, BytesTotal: 20, Attempts: 1},
			Promotion: &dockerio.PromotionStatus{Machine: dockerio.NamespacedObjectReference{Namespace: "b", Name: "m"}, Phase: dockerio.PromotionCloning},
		}},
		"negative progress is Invalid": {
			status: dockerio.MacOSImageStatus{Recovery: &dockerio.RecoveryStatus{BytesDone: -1}},
			want:   []fieldErr{invalid("status.recovery.bytesDone")},
		},
		"unknown promotion phase is NotSupported": {
			status: dockerio.MacOSImageStatus{Promotion: &dockerio.PromotionStatus{
				Machine: dockerio.NamespacedObjectReference{Namespace: "b", Name: "m"}, Phase: "Copying"}},
			want: []fieldErr{notSupported("status.promotion.phase")},
		},
		"promotion of no machine is Required": {
			status: dockerio.MacOSImageStatus{Promotion: &dockerio.PromotionStatus{Phase: dockerio.PromotionStopping}},
			want:   []fieldErr{required("status.promotion.machine.namespace"), required("status.promotion.machine.name")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.Image("sonoma")
			old.ResourceVersion = "7"
			img := old.DeepCopy()
			img.Status = tc.status
			assertErrors(t, tc.want, ValidateMacOSImageStatusUpdate(img, old))
		})
	}
}
