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
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/macosreleases"
)

// validateGoldenImage checks what makes an image from Apple's recovery
// service (source.recovery) and what promotes an install session into it
// (promoteFrom), and that the board-ids an image names can run its release
// (pkg/macosreleases: a board the service is asked as answers only with the
// releases its model runs).
func validateGoldenImage(s *dockerio.MacOSImageSpec, fld *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	src := fld.Child("source")
	if r := s.Source.Recovery; r != nil {
		rf := src.Child("recovery")
		if s.Source.DataSource == nil {
			allErrs = append(allErrs, field.Required(src.Child("dataSource"),
				"source.recovery publishes the disk a person installs through a DataSource: name the DataSource (it need not exist yet; its namespace holds the recovery volume)"))
		}
		release, known := macosreleases.ReleaseNamed(r.Release)
		switch {
		case r.Release == "":
			allErrs = append(allErrs, field.Required(rf.Child("release"), "the release to fetch, one of "+fmt.Sprint(macosreleases.ReleaseNames())))
		case !known || release.Name != r.Release:
			allErrs = append(allErrs, field.NotSupported(rf.Child("release"), r.Release, macosreleases.ReleaseNames()))
		default:
			if v, ok := macosreleases.ParseRelease(s.Release); s.Release != "" && (!ok || !release.Family.Contains(v)) {
				allErrs = append(allErrs, field.Invalid(fld.Child("release"), s.Release,
					fmt.Sprintf("must be a version of the release source.recovery fetches, %s (%s), such as %q or %q", release.Title, release.Family, release.Name, release.Family.String())))
			}
		}
		if r.BoardID != "" {
			switch {
			case !boardIDPattern.MatchString(r.BoardID):
				allErrs = append(allErrs, field.Invalid(rf.Child("boardID"), r.BoardID, "must be an Apple board-id such as Mac-7BA5B2D9E42DDD94"))
			case known:
				if err := macosreleases.BoardSupports(r.BoardID, r.Release); err != nil {
					allErrs = append(allErrs, field.Invalid(rf.Child("boardID"), r.BoardID,
						"Apple's recovery service answers a board only with releases its model runs: "+err.Error()))
				}
			}
		}
	}
	if s.BoardID != "" && boardIDPattern.MatchString(s.BoardID) {
		if err := macosreleases.BoardSupports(s.BoardID, s.Release); err != nil {
			allErrs = append(allErrs, field.Invalid(fld.Child("boardID"), s.BoardID, err.Error()))
		}
	}
	if p := s.PromoteFrom; p != nil {
		if s.Source.DataSource == nil {
			allErrs = append(allErrs, field.Required(src.Child("dataSource"),
				"promoteFrom points the image's DataSource at the install session's disk: name the DataSource"))
		}
		allErrs = append(allErrs, validateNamespacedReference(*p, fld.Child("promoteFrom"))...)
	}
	return allErrs
}

// validateImageStatus checks the parts of an image's status the
// controller writes beyond its conditions.
func validateImageStatus(st *dockerio.MacOSImageStatus, fld *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if r := st.Recovery; r != nil {
		rf := fld.Child("recovery")
		if r.BytesDone < 0 {
			allErrs = append(allErrs, field.Invalid(rf.Child("bytesDone"), r.BytesDone, "must not be negative"))
		}
		if r.BytesTotal < 0 {
			allErrs = append(allErrs, field.Invalid(rf.Child("bytesTotal"), r.BytesTotal, "must not be negative"))
		}
		if r.Attempts < 0 {
			allErrs = append(allErrs, field.Invalid(rf.Child("attempts"), r.Attempts, "must not be negative"))
		}
	}
	if p := st.Promotion; p != nil {
		pf := fld.Child("promotion")
		switch p.Phase {
		case "", dockerio.PromotionStopping, dockerio.PromotionCloning, dockerio.PromotionSucceeded, dockerio.PromotionFailed:
		default:
			allErrs = append(allErrs, field.NotSupported(pf.Child("phase"), p.Phase, []dockerio.PromotionPhase{
				dockerio.PromotionStopping, dockerio.PromotionCloning, dockerio.PromotionSucceeded, dockerio.PromotionFailed}))
		}
		allErrs = append(allErrs, validateNamespacedReference(p.Machine, pf.Child("machine"))...)
	}
	return allErrs
}
