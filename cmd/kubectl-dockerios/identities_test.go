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

package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/identityimport"
)

func identityPool(name, model string) *v1alpha1.MacOSIdentityPool {
	return &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSIdentityPoolSpec{Model: model}}
}

func identitiesOf(t *testing.T, p *plugin) []v1alpha1.MacOSIdentity {
	t.Helper()
	l, err := p.client.DockeriosV1alpha1().MacOSIdentities().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func valuesOf(s v1alpha1.MacOSIdentitySpec) identity.Values {
	return identity.Values{Model: s.Model, SerialNumber: s.SerialNumber, BoardSerialNumber: s.BoardSerialNumber,
		SystemUUID: s.SystemUUID, MACAddress: s.MACAddress, ROM: s.ROM}
}

// row matches the report's row n for v, with outcome.
func row(n int, pool string, v identity.Values, outcome string) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+%s\s+%s\s+%s\s`, n, v.SerialNumber, identityimport.Name(pool, v), regexp.QuoteMeta(outcome)))
}

// generate creates N valid identities of the pool's model, named as import
// names them, and reports each as import does.
func TestGenerate_CreatesValidIdentitiesOfThePoolsModel(t *testing.T) {
	p := newPlugin(t, newFakeAPI(identityPool("mini", "Macmini8,1")))
	if err := p.run(context.Background(), "identities", "generate", "--pool", "mini", "--count", "5", "--seed", "42"); err != nil {
		t.Fatalf("%v\n%s", err, p.stderr)
	}
	ids := identitiesOf(t, p)
	if len(ids) != 5 {
		t.Fatalf("%d identities, want 5", len(ids))
	}
	for _, id := range ids {
		v := valuesOf(id.Spec)
		if err := v.Validate(); err != nil {
			t.Errorf("identity %s: %v", id.Name, err)
		}
		if id.Spec.PoolName != "mini" || v.Model != "Macmini8,1" || id.Name != identityimport.Name("mini", v) {
			t.Errorf("identity %s: pool %s, model %s, want pool mini, Macmini8,1, a name from its values", id.Name, id.Spec.PoolName, v.Model)
		}
	}
	gen := identity.NewGenerator(42, "Macmini8,1")
	for i := 1; i <= 5; i++ {
		if r := row(i, "mini", gen.Next(), "created"); !r.MatchString(p.stdout.String()) {
			t.Errorf("no row matching %s:\n%s", r, p.stdout)
		}
	}
	if !strings.HasSuffix(p.stdout.String(), "5 created, 0 already present, 0 rejected\n") {
		t.Errorf("stdout:\n%s", p.stdout)
	}
	if p.stderr.String() != "Warning: generated identities are synthetic: for test and demo clusters, never for a Mac that talks to Apple\n" {
		t.Errorf("stderr %q: want the warning alone (a seed was given)", p.stderr)
	}
}

// The same seed gives the same identities: running again changes nothing.
func TestGenerate_SameSeedIsAlreadyPresent(t *testing.T) {
	p := newPlugin(t, newFakeAPI(identityPool("imacpro", "iMacPro1,1")))
	args := []string{"identities", "generate", "--pool", "imacpro", "--count", "3", "--seed", "7"}
	if err := p.run(context.Background(), args...); err != nil {
		t.Fatal(err)
	}
	p.stdout = &syncBuffer{}
	if err := p.run(context.Background(), args...); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p.stdout.String(), "0 created, 3 already present, 0 rejected\n") || len(identitiesOf(t, p)) != 3 {
		t.Errorf("second run:\n%s", p.stdout)
	}
}

// Without --seed the seed is random, and said, so that the run can be
// made again.
func TestGenerate_SaysTheRandomSeed(t *testing.T) {
	p := newPlugin(t, newFakeAPI(identityPool("imacpro", "iMacPro1,1")))
	if err := p.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "2", "--dry-run=client", "-o", "csv"); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Using --seed (\d+) `).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no seed said: %q", p.stderr)
	}
	again := newPlugin(t, newFakeAPI(identityPool("imacpro", "iMacPro1,1")))
	if err := again.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "2", "--dry-run=client", "-o", "csv", "--seed", m[1]); err != nil {
		t.Fatal(err)
	}
	if again.stdout.String() != p.stdout.String() {
		t.Errorf("--seed %s made other identities:\n%s\nthan:\n%s", m[1], again.stdout, p.stdout)
	}
}

// A value the ledger already holds is the apiserver's to refuse (409);
// generate reports the row rejected with the reason, and fails.
func TestGenerate_ReportsAConflictAsImportDoes(t *testing.T) {
	api := newFakeAPI(identityPool("imacpro", "iMacPro1,1"))
	second := identity.NewGenerator(1, "iMacPro1,1")
	second.Next()
	dup := second.Next()
	api.PrependReactor("create", "macosidentities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MacOSIdentity).Spec.SerialNumber != dup.SerialNumber {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(v1alpha1.Resource("macosidentities"), "x", field.ErrorList{
			field.Duplicate(field.NewPath("spec", "serialNumber"), dup.SerialNumber+" is already held by MacOSIdentity other-0123456789abcdef"),
		}.ToAggregate())
	})
	p := newPlugin(t, api)
	err := p.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "3", "--seed", "1")
	if err == nil || err.Error() != "1 of 3 rows rejected" {
		t.Errorf("error %v, want 1 of 3 rows rejected", err)
	}
	if r := row(2, "imacpro", dup, "rejected"); !r.MatchString(p.stdout.String()) || !strings.Contains(p.stdout.String(), "is already held by MacOSIdentity other-0123456789abcdef") {
		t.Errorf("no rejected row 2 naming the holder:\n%s", p.stdout)
	}
	if len(identitiesOf(t, p)) != 2 {
		t.Errorf("%d identities, want the 2 not refused", len(identitiesOf(t, p)))
	}
}

// A failure that stops generate part way (the server gone) still prints
// the identities made before it, so that -o csv does not lose them.
func TestGenerate_StoppedPartWayPrintsWhatWasMade(t *testing.T) {
	api := newFakeAPI(identityPool("imacpro", "iMacPro1,1"))
	gen := identity.NewGenerator(5, "iMacPro1,1")
	first, second := gen.Next(), gen.Next()
	api.PrependReactor("create", "macosidentities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MacOSIdentity).Spec.SerialNumber != second.SerialNumber {
			return false, nil, nil
		}
		return true, nil, apierrors.NewInternalError(fmt.Errorf("etcd is gone"))
	})
	p := newPlugin(t, api)
	err := p.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "3", "--seed", "5", "-o", "csv")
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "etcd is gone") {
		t.Errorf("error %v, want line 2's", err)
	}
	rows, rowErrs, perr := identity.ParseRows(strings.NewReader(p.stdout.String()))
	if perr != nil || len(rowErrs) > 0 || len(rows) != 1 || rows[0].Values != first {
		t.Errorf("stdout %q: want the one identity created", p.stdout)
	}
}

// --dry-run=client sends nothing, and -o csv is a serial set identities
// import reads back to the same values.
func TestGenerate_ClientDryRunPrintsASerialSet(t *testing.T) {
	api := newFakeAPI(identityPool("imacpro", "iMacPro1,1"))
	p := newPlugin(t, api)
	if err := p.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "4", "--seed", "3", "--dry-run=client", "-o", "csv"); err != nil {
		t.Fatal(err)
	}
	for _, a := range api.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a client dry run sent a %s of %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	rows, rowErrs, err := identity.ParseRows(strings.NewReader(p.stdout.String()))
	if err != nil || len(rowErrs) > 0 || len(rows) != 4 {
		t.Fatalf("%d rows, %v, %v:\n%s", len(rows), rowErrs, err, p.stdout)
	}
	gen := identity.NewGenerator(3, "iMacPro1,1")
	for i, r := range rows {
		if want := gen.Next(); r.Values != want {
			t.Errorf("row %d: %+v, want %+v", i+1, r.Values, want)
		}
	}
}

// --dry-run=server asks the apiserver to check each identity and store none.
func TestGenerate_ServerDryRun(t *testing.T) {
	api := newFakeAPI(identityPool("imacpro", "iMacPro1,1"))
	var dryRuns []string
	api.PrependReactor("create", "macosidentities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		dryRuns = append(dryRuns, strings.Join(a.(k8stesting.CreateActionImpl).CreateOptions.DryRun, ","))
		return true, a.(k8stesting.CreateAction).GetObject(), nil
	})
	p := newPlugin(t, api)
	if err := p.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "2", "--seed", "3", "--dry-run=server"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(dryRuns, " ") != "All All" {
		t.Errorf("creates sent with dryRun %q, want All each", dryRuns)
	}
	if !strings.Contains(p.stdout.String(), "2 created, 0 already present, 0 rejected\n(server dry run: the apiserver checked each identity and stored none)\n") {
		t.Errorf("stdout:\n%s", p.stdout)
	}
}

// -o yaml is the identities as MacOSIdentity objects, valid and named.
func TestGenerate_OutputYAML(t *testing.T) {
	p := newPlugin(t, newFakeAPI(identityPool("imacpro", "iMacPro1,1")))
	if err := p.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "2", "--seed", "3", "-o", "yaml"); err != nil {
		t.Fatal(err)
	}
	var l v1alpha1.MacOSIdentityList
	if err := yaml.UnmarshalStrict([]byte(p.stdout.String()), &l); err != nil {
		t.Fatalf("%v:\n%s", err, p.stdout)
	}
	if l.Kind != "MacOSIdentityList" || len(l.Items) != 2 {
		t.Fatalf("%s of %d", l.Kind, len(l.Items))
	}
	for _, id := range l.Items {
		if id.Name != identityimport.Name("imacpro", valuesOf(id.Spec)) || valuesOf(id.Spec).Validate() != nil {
			t.Errorf("identity %+v", id)
		}
	}
}

func TestGenerate_RefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no pool", []string{"--count", "1"}, `required flag(s) "pool" not set`},
		{"no count", []string{"--pool", "imacpro"}, `required flag(s) "count" not set`},
		{"a count of 0", []string{"--pool", "imacpro", "--count", "0"}, "--count must be between 1 and 200000"},
		{"a count past a file's", []string{"--pool", "imacpro", "--count", "200001"}, "--count must be between 1 and 200000"},
		{"an unknown dry run", []string{"--pool", "imacpro", "--count", "1", "--dry-run=yes"}, `--dry-run must be "none", "server" or "client", not "yes"`},
		{"an unknown output", []string{"--pool", "imacpro", "--count", "1", "-o", "tsv"}, `output format "tsv"`},
		{"a pool that does not exist", []string{"--pool", "nope", "--count", "1"}, `MacOSIdentityPool nope: macosidentitypools.dockerios.io "nope" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(identityPool("imacpro", "iMacPro1,1"))
			p := newPlugin(t, api)
			err := p.run(context.Background(), append([]string{"identities", "generate"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if n := len(identitiesOf(t, p)); n > 0 {
				t.Errorf("%d identities created", n)
			}
		})
	}
}

// An unknown -o names every format generate prints, its own csv included.
func TestGenerate_UnknownOutputListsCSV(t *testing.T) {
	p := newPlugin(t, newFakeAPI(identityPool("imacpro", "iMacPro1,1")))
	err := p.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "1", "-o", "tsv")
	if err == nil || !strings.Contains(err.Error(), "csv") || !strings.Contains(err.Error(), "yaml") {
		t.Errorf("error %v, want one listing csv and yaml", err)
	}
}

// A client dry run's table says what was made and that none was created.
func TestGenerate_ClientDryRunTable(t *testing.T) {
	p := newPlugin(t, newFakeAPI(identityPool("imacpro", "iMacPro1,1")))
	if err := p.run(context.Background(), "identities", "generate", "--pool", "imacpro", "--count", "2", "--seed", "3", "--dry-run=client"); err != nil {
		t.Fatal(err)
	}
	gen := identity.NewGenerator(3, "iMacPro1,1")
	a, b := gen.Next(), gen.Next()
	want := fmt.Sprintf("LINE  SERIAL        IDENTITY\n1     %s  %s\n2     %s  %s\n2 generated, none created (client dry run)\n",
		a.SerialNumber, identityimport.Name("imacpro", a), b.SerialNumber, identityimport.Name("imacpro", b))
	if p.stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", p.stdout, want)
	}
	if n := len(identitiesOf(t, p)); n != 0 {
		t.Errorf("%d identities created", n)
	}
}
