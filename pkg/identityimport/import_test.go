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

package identityimport

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
	"github.com/dockerios/dockerios/pkg/identity"
)

// Rows osx-serial-generator wrote (pkg/identity/testdata).
const (
	row1 = `"iMacPro1,1","C02CK029HX87","C02015700QXJG36CB","4B408A88-4062-4532-9AA1-3D8A3549327F","34:31:8F:D3:88:E4","1920","1080",""` + "\n"
	row2 = `"iMacPro1,1","C02FX08QHX87","C02126802GUJG36JA","DEFDACC8-2225-471C-AEE1-19EDDE5A3F90","28:8F:F6:F5:DE:D0","1920","1080",""` + "\n"
)

var values1 = identity.Values{Model: "iMacPro1,1", SerialNumber: "C02CK029HX87", BoardSerialNumber: "C02015700QXJG36CB",
	SystemUUID: "4B408A88-4062-4532-9AA1-3D8A3549327F", MACAddress: "34:31:8F:D3:88:E4", ROM: "34318FD388E4"}

// forms are the spellings of v's values a reader might recognise.
func forms(v identity.Values) []string {
	return []string{v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, strings.ReplaceAll(v.SystemUUID, "-", ""),
		v.MACAddress, strings.ReplaceAll(v.MACAddress, ":", ""), strings.ReplaceAll(v.MACAddress, ":", "-"), v.ROM}
}

func TestName(t *testing.T) {
	name := Name("imacpro", values1)
	if !regexp.MustCompile(`^imacpro-[0-9a-f]{16}$`).MatchString(name) {
		t.Errorf("name %q is not <pool>-<16 hex digits>", name)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Errorf("name %q: %v", name, errs)
	}
	if Name("imacpro", values1) != name {
		t.Error("the same values give another name: a re-run would not find its identities")
	}
	for _, f := range forms(values1) {
		if strings.Contains(strings.ToLower(name), strings.ToLower(f)) {
			t.Errorf("name %q shows the value %q", name, f)
		}
	}
	// Any one value changed gives another name; the model and the pool
	// are not identity values (the pool is the name's prefix).
	for _, tc := range []struct {
		field  string
		mutate func(*identity.Values)
	}{
		{"serialNumber", func(v *identity.Values) { v.SerialNumber = "C02FX08QHX87" }},
		{"boardSerialNumber", func(v *identity.Values) { v.BoardSerialNumber = "C02126802GUJG36JA" }},
		{"systemUUID", func(v *identity.Values) { v.SystemUUID = "DEFDACC8-2225-471C-AEE1-19EDDE5A3F90" }},
		{"macAddress", func(v *identity.Values) { v.MACAddress = "28:8F:F6:F5:DE:D0" }},
		{"rom", func(v *identity.Values) { v.ROM = "288FF6F5DED0" }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			v := values1
			tc.mutate(&v)
			if Name("imacpro", v) == name {
				t.Errorf("changing %s keeps the name %q", tc.field, name)
			}
		})
	}
	if other := Name("other", values1); other == name || !strings.HasPrefix(other, "other-") {
		t.Errorf("pool other: %q", other)
	}
}

func pool(name string) *v1alpha1.MacOSIdentityPool {
	return &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSIdentityPoolSpec{Model: "iMacPro1,1"}}
}

func spec(pool string, v identity.Values) v1alpha1.MacOSIdentitySpec {
	return v1alpha1.MacOSIdentitySpec{PoolName: pool, Model: v.Model, SerialNumber: v.SerialNumber, BoardSerialNumber: v.BoardSerialNumber,
		SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM}
}

func TestImport(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		// existing objects besides the pool; setup may add reactors.
		existing []runtime.Object
		setup    func(*fake.Clientset)
		want     []Result
		summary  Summary
	}{
		{
			name: "every row created, named by the hash of its values",
			file: row1 + row2,
			want: []Result{
				{Line: 1, Serial: "C02CK029HX87", Identity: Name("imacpro", values1), Outcome: Created},
				{Line: 2, Serial: "C02FX08QHX87", Outcome: Created},
			},
			summary: Summary{Created: 2},
		},
		{
			name: "a row already imported is already present",
			file: row1,
			existing: []runtime.Object{&v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: Name("imacpro", values1)},
				Spec: spec("imacpro", values1)}},
			want:    []Result{{Line: 1, Serial: "C02CK029HX87", Identity: Name("imacpro", values1), Outcome: AlreadyPresent}},
			summary: Summary{AlreadyPresent: 1},
		},
		{
			name: "another identity under the row's name is rejected",
			file: row1,
			existing: []runtime.Object{&v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: Name("imacpro", values1)},
				Spec: spec("other", values1)}},
			want: []Result{{Line: 1, Serial: "C02CK029HX87", Identity: Name("imacpro", values1), Outcome: Rejected,
				Reason: "MacOSIdentity " + Name("imacpro", values1) + " already exists with other values"}},
			summary: Summary{Rejected: 1},
		},
		{
			name: "a value another identity holds is rejected naming the holder",
			file: row1,
			setup: func(c *fake.Clientset) {
				c.PrependReactor("create", "macosidentities", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewConflict(v1alpha1.Resource("macosidentities"), "x", field.ErrorList{
						field.Duplicate(field.NewPath("spec", "boardSerialNumber"), "C02015700QXJG36CB is already held by MacOSIdentity imacpro-0123456789abcdef"),
					}.ToAggregate())
				})
			},
			want:    []Result{{Line: 1, Serial: "C02CK029HX87", Identity: Name("imacpro", values1), Outcome: Rejected}},
			summary: Summary{Rejected: 1},
		},
		{
			name:    "a malformed row is rejected with the reason, the others imported",
			file:    row1 + `"iMacPro1,1","C02CK029HX8","C02126802GUJG36JA","DEFDACC8-2225-471C-AEE1-19EDDE5A3F90","28:8F:F6:F5:DE:D0","1920","1080",""` + "\n",
			want:    []Result{{Line: 1, Outcome: Created}, {Line: 2, Outcome: Rejected}},
			summary: Summary{Created: 1, Rejected: 1},
		},
		{
			name:    "a malformed row keeps its valid serial in the report",
			file:    strings.Replace(row2, "C02126802GUJG36JA", "C02126802GUJG36JB", 1),
			want:    []Result{{Line: 1, Serial: "C02FX08QHX87", Outcome: Rejected}},
			summary: Summary{Rejected: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(append([]runtime.Object{pool("imacpro")}, tc.existing...)...)
			if tc.setup != nil {
				tc.setup(c)
			}
			im := &Importer{Client: c, Pool: "imacpro"}
			results, summary, err := im.Import(context.Background(), strings.NewReader(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if summary != tc.summary {
				t.Errorf("summary %+v, want %+v", summary, tc.summary)
			}
			if len(results) != len(tc.want) {
				t.Fatalf("results %+v, want %d", results, len(tc.want))
			}
			for i, want := range tc.want {
				got := results[i]
				if got.Line != want.Line || got.Outcome != want.Outcome ||
					(want.Serial != "" && got.Serial != want.Serial) || (want.Identity != "" && got.Identity != want.Identity) ||
					(want.Reason != "" && got.Reason != want.Reason) {
					t.Errorf("row %d: %+v, want %+v", i, got, want)
				}
				if got.Outcome == Rejected && got.Reason == "" {
					t.Errorf("row %d rejected without a reason", i)
				}
			}
			// Every identity made is named by its values' hash, and its
			// name says none of them.
			ids, err := c.DockeriosV1alpha1().MacOSIdentities().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids.Items {
				s := id.Spec
				v := identity.Values{Model: s.Model, SerialNumber: s.SerialNumber, BoardSerialNumber: s.BoardSerialNumber,
					SystemUUID: s.SystemUUID, MACAddress: s.MACAddress, ROM: s.ROM}
				if s.PoolName == "imacpro" && id.Name != Name("imacpro", v) {
					t.Errorf("identity %s of serial %s is not named %s", id.Name, s.SerialNumber, Name("imacpro", v))
				}
				for _, f := range forms(v) {
					if strings.Contains(strings.ToLower(id.Name), strings.ToLower(f)) {
						t.Errorf("identity name %q shows the value %q", id.Name, f)
					}
				}
			}
			var out bytes.Buffer
			if err := Print(&out, results, summary); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "LINE") {
				t.Errorf("output %q", out.String())
			}
		})
	}
}

func TestImportRerunChangesNothing(t *testing.T) {
	c := newClient(pool("imacpro"))
	im := &Importer{Client: c, Pool: "imacpro"}
	if _, s, err := im.Import(context.Background(), strings.NewReader(row1+row2)); err != nil || s != (Summary{Created: 2}) {
		t.Fatalf("first import: %+v, %v", s, err)
	}
	results, s, err := im.Import(context.Background(), strings.NewReader(row1+row2))
	if err != nil || s != (Summary{AlreadyPresent: 2}) {
		t.Fatalf("second import: %+v, %v", s, err)
	}
	for _, r := range results {
		if r.Outcome != AlreadyPresent {
			t.Errorf("row %d: %s", r.Line, r.Outcome)
		}
	}
}

// Values made in memory (identities generate) go through the row path:
// the same names, the same outcomes, and a conflict reported by position.
func TestImportValues(t *testing.T) {
	values2 := identity.Values{Model: "iMacPro1,1", SerialNumber: "C02FX08QHX87", BoardSerialNumber: "C02126802GUJG36JA",
		SystemUUID: "DEFDACC8-2225-471C-AEE1-19EDDE5A3F90", MACAddress: "28:8F:F6:F5:DE:D0", ROM: "288FF6F5DED0"}
	c := newClient(pool("imacpro"), &v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: Name("imacpro", values1)}, Spec: spec("imacpro", values1)})
	c.PrependReactor("create", "macosidentities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MacOSIdentity).Spec.SerialNumber != values2.SerialNumber {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(v1alpha1.Resource("macosidentities"), "x", field.ErrorList{
			field.Duplicate(field.NewPath("spec", "macAddress"), "28:8F:F6:F5:DE:D0 is already held by MacOSIdentity other-0123456789abcdef"),
		}.ToAggregate())
	})
	im := &Importer{Client: c, Pool: "imacpro"}
	results, summary, err := im.ImportValues(context.Background(), []identity.Values{values1, values2})
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Line: 1, Serial: values1.SerialNumber, Identity: Name("imacpro", values1), Outcome: AlreadyPresent},
		{Line: 2, Serial: values2.SerialNumber, Identity: Name("imacpro", values2), Outcome: Rejected},
	}
	if len(results) != len(want) {
		t.Fatalf("results %+v, want %+v", results, want)
	}
	for i := range want {
		got := results[i]
		got.Reason = ""
		if got != want[i] {
			t.Errorf("result %d: %+v, want %+v", i, results[i], want[i])
		}
	}
	if r := results[1].Reason; !strings.Contains(r, "28:8F:F6:F5:DE:D0 is already held by MacOSIdentity other-0123456789abcdef") {
		t.Errorf("a conflict's reason %q does not name the holder", r)
	}
	if summary != (Summary{AlreadyPresent: 1, Rejected: 1}) {
		t.Errorf("summary %+v", summary)
	}
	if _, _, err := (&Importer{Client: newClient(), Pool: "nope"}).ImportValues(context.Background(), []identity.Values{values1}); err == nil ||
		!strings.Contains(err.Error(), "MacOSIdentityPool nope") {
		t.Errorf("an unknown pool: error %v", err)
	}
}

// A dry run asks the server to check each create and says what it would
// do; the request carries dryRun=All, so that nothing is stored.
func TestImportDryRunAsksTheServerNotToStore(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		c := newClient(pool("imacpro"))
		var sent [][]string
		c.PrependReactor("create", "macosidentities", func(a k8stesting.Action) (bool, runtime.Object, error) {
			sent = append(sent, a.(k8stesting.CreateActionImpl).CreateOptions.DryRun)
			return false, nil, nil
		})
		im := &Importer{Client: c, Pool: "imacpro", DryRun: dryRun}
		if _, s, err := im.Import(context.Background(), strings.NewReader(row1)); err != nil || s != (Summary{Created: 1}) {
			t.Fatalf("dry run %v: %+v, %v", dryRun, s, err)
		}
		want := []string(nil)
		if dryRun {
			want = []string{metav1.DryRunAll}
		}
		if len(sent) != 1 || strings.Join(sent[0], ",") != strings.Join(want, ",") {
			t.Errorf("dry run %v: creates sent with dryRun %q, want %q", dryRun, sent, want)
		}
	}
}

func TestImportUnknownPool(t *testing.T) {
	im := &Importer{Client: newClient(), Pool: "nope"}
	if _, _, err := im.Import(context.Background(), strings.NewReader(row1)); err == nil || !strings.Contains(err.Error(), "MacOSIdentityPool nope") {
		t.Errorf("error %v", err)
	}
}

// newClient is a fake clientset. Not NewClientset: its field-managed
// tracker needs a typed schema of our kinds that the fake does not carry.
func newClient(objects ...runtime.Object) *fake.Clientset {
	return fake.NewSimpleClientset(objects...) //nolint:staticcheck // see above
}

// An import that stops part way (Ctrl-C, the server gone) still reports
// the rows it read in file order, and says where it stopped: the rows
// before that line are all accounted for, that one may or may not have
// been created, and none after it was tried.
func TestImportStoppedPartWayReportsInFileOrder(t *testing.T) {
	bad := `"iMacPro1,1","C02CK029HX8","x","y","z","1920","1080",""` + "\n"
	c := newClient(pool("imacpro"))
	c.PrependReactor("create", "macosidentities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MacOSIdentity).Spec.SerialNumber != "C02FX08QHX87" {
			return false, nil, nil
		}
		return true, nil, context.Canceled
	})
	im := &Importer{Client: c, Pool: "imacpro"}
	results, summary, err := im.Import(context.Background(), strings.NewReader(row1+row2+bad))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "no later row") {
		t.Errorf("error %v, want one saying the import stopped at line 2", err)
	}
	var lines []int
	for _, r := range results {
		lines = append(lines, r.Line)
	}
	if !slices.Equal(lines, []int{1, 3}) {
		t.Errorf("results for lines %v, want [1 3]: the rows read, in file order", lines)
	}
	if summary != (Summary{Created: 1, Rejected: 1}) {
		t.Errorf("summary %+v", summary)
	}
}
