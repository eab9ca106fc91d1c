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

package storage

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
)

// HoldLifter ends a pool's restore hold (identityledger.Ledger.LiftHold).
type HoldLifter interface {
	LiftHold(ctx context.Context, pool string) (bool, error)
}

// HoldREST serves macosidentitypools/<name>/hold: DELETE lifts the hold a
// restore puts the pool on, and gives its free identities back. The
// controller does it once it has compared every VM it runs with the
// ledger; a person may do it with `kubectl delete --raw`. It needs the
// `delete` verb on macosidentitypools/hold, which no user role grants.
type HoldREST struct {
	pools  *genericregistry.Store
	lifter HoldLifter
}

var (
	_ rest.Storage         = &HoldREST{}
	_ rest.GracefulDeleter = &HoldREST{}
)

// New is the kind DELETE answers with: the pool.
func (r *HoldREST) New() runtime.Object { return &dockerio.MacOSIdentityPool{} }

// Destroy releases nothing: the pool's store owns the storage.
func (r *HoldREST) Destroy() {}

// Delete lifts the hold of pool name and answers with the pool. A pool that
// is not on hold answers 404 NotFound for the hold, so that a caller knows
// there was nothing to lift.
func (r *HoldREST) Delete(ctx context.Context, name string, _ rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	if options != nil && len(options.DryRun) > 0 {
		return nil, false, apierrors.NewBadRequest("dry run is not supported for lifting a pool's hold")
	}
	if _, err := r.pools.Get(ctx, name, &metav1.GetOptions{}); err != nil {
		return nil, false, err
	}
	lifted, err := r.lifter.LiftHold(ctx, name)
	if err != nil {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("lifting the hold of MacOSIdentityPool %s: %w", name, err))
	}
	if !lifted {
		return nil, false, apierrors.NewNotFound(dockerio.Resource("macosidentitypools/hold"), name)
	}
	obj, err := r.pools.Get(ctx, name, &metav1.GetOptions{})
	return obj, true, err
}
