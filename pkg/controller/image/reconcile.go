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

// Package image keeps each MacOSImage's Ready condition: whether the CDI
// DataSource or PersistentVolumeClaim it names exists and can be cloned
// from. Machines are not held back by it (CDI reports a missing source on
// the DataVolume too); it tells an operator before a clone fails.
package image

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// Reasons of an image's Ready condition.
const (
	ReasonSourceReady    = "SourceReady"
	ReasonSourceNotFound = "SourceNotFound"
	ReasonSourceNotReady = "SourceNotReady"
)

// Recheck is how often an image's source is looked at again: sources live
// in other namespaces and are not watched.
const Recheck = time.Minute

// Reconciler reconciles MacOSImages.
type Reconciler struct {
	Images  dlisters.MacOSImageLister
	Client  versioned.Interface
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Reconcile sets the image's Ready condition from its source and says when
// to look again.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (time.Duration, error) {
	img, err := r.Images.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	status, reason, msg := r.check(ctx, img)
	cond := metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: msg, ObservedGeneration: img.Generation}
	st := img.Status.DeepCopy()
	st.ObservedGeneration = img.Generation
	meta.SetStatusCondition(&st.Conditions, cond)
	old := meta.FindStatusCondition(img.Status.Conditions, "Ready")
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message &&
		img.Status.ObservedGeneration == img.Generation {
		return Recheck, nil
	}
	if old == nil || old.Status != cond.Status {
		meta.FindStatusCondition(st.Conditions, "Ready").LastTransitionTime = metav1.Now()
	}
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return 0, err
	}
	if _, err := r.Client.DockeriosV1alpha1().MacOSImages().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("writing image status: %w", err)
	}
	return Recheck, nil
}

func (r *Reconciler) check(ctx context.Context, img *v1alpha1.MacOSImage) (metav1.ConditionStatus, string, string) {
	switch src := img.Spec.Source; {
	case src.DataSource != nil:
		u, err := r.Dynamic.Resource(external.DataSources).Namespace(src.DataSource.Namespace).Get(ctx, src.DataSource.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return metav1.ConditionFalse, ReasonSourceNotFound, fmt.Sprintf("DataSource %s/%s does not exist", src.DataSource.Namespace, src.DataSource.Name)
		}
		if err != nil {
			return metav1.ConditionUnknown, ReasonSourceNotFound, "reading the DataSource: " + err.Error()
		}
		ds, err := external.FromUnstructured[cdiv1.DataSource](u)
		if err != nil {
			return metav1.ConditionUnknown, ReasonSourceNotReady, err.Error()
		}
		for _, c := range ds.Status.Conditions {
			if c.Type == cdiv1.DataSourceReady {
				if c.Status == corev1.ConditionTrue {
					return metav1.ConditionTrue, ReasonSourceReady, fmt.Sprintf("DataSource %s/%s is Ready", src.DataSource.Namespace, src.DataSource.Name)
				}
				return metav1.ConditionFalse, ReasonSourceNotReady, fmt.Sprintf("DataSource %s/%s is not Ready: %s: %s", src.DataSource.Namespace, src.DataSource.Name, c.Reason, c.Message)
			}
		}
		return metav1.ConditionFalse, ReasonSourceNotReady, fmt.Sprintf("DataSource %s/%s reports no Ready condition yet", src.DataSource.Namespace, src.DataSource.Name)
	case src.PVC != nil:
		pvc, err := r.Kube.CoreV1().PersistentVolumeClaims(src.PVC.Namespace).Get(ctx, src.PVC.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return metav1.ConditionFalse, ReasonSourceNotFound, fmt.Sprintf("PersistentVolumeClaim %s/%s does not exist", src.PVC.Namespace, src.PVC.Name)
		}
		if err != nil {
			return metav1.ConditionUnknown, ReasonSourceNotFound, "reading the PersistentVolumeClaim: " + err.Error()
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return metav1.ConditionFalse, ReasonSourceNotReady, fmt.Sprintf("PersistentVolumeClaim %s/%s is %s, not Bound", src.PVC.Namespace, src.PVC.Name, pvc.Status.Phase)
		}
		return metav1.ConditionTrue, ReasonSourceReady, fmt.Sprintf("PersistentVolumeClaim %s/%s is Bound", src.PVC.Namespace, src.PVC.Name)
	}
	return metav1.ConditionFalse, ReasonSourceNotFound, "the image names no source"
}
