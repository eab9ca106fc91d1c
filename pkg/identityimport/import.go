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

// Package identityimport turns a serial-set file (osx-serial-generator's
// CSV or TSV) into MacOSIdentity objects of one pool, one row at a time,
// and says what became of each row. Running it again on the same file
// changes nothing and says so: it is safe to retry after any failure.
package identityimport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	clientset "github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
)

// Outcome is what became of one row.
type Outcome string

// Outcomes of a row.
const (
	Created        Outcome = "created"
	AlreadyPresent Outcome = "already present"
	Rejected       Outcome = "rejected"
)

// Result is one row's outcome.
type Result struct {
	Line     int
	Serial   string
	Identity string
	Outcome  Outcome
	Reason   string
}

// Summary counts the outcomes of an import.
type Summary struct {
	Created, AlreadyPresent, Rejected int
}

// Importer imports serial sets into one pool.
type Importer struct {
	Client clientset.Interface
	Pool   string
	// DryRun asks the server to check every create as it would make it
	// (validation, and rule 1's uniqueness across every pool) without
	// storing anything.
	DryRun bool
}

// NameHashLength is how many hex digits of the values' hash a name
// carries: 64 bits, so two different rows never meet in practice.
const NameHashLength = 16

// Name is the MacOSIdentity name of an identity: its pool and a hash of its
// five values, so that the same row always maps to the same object and a
// re-run finds it. The name is the one thing about an identity that every
// user who may read a machine sees (status.identityRef), so it must not
// say any value: the hash covers the 128-bit system UUID too, which makes
// it infeasible to recover a serial from a name by trying candidates.
// Values are expected in canonical form (identity.ParseRows gives them).
func Name(pool string, v identity.Values) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{
		v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress, v.ROM,
	}, "\x00")))
	return pool + "-" + hex.EncodeToString(sum[:])[:NameHashLength]
}

// Import reads the file and creates one identity per valid row. Every row
// gets a Result, in file order; err is only for failures that stop the
// whole import (an unreadable file, the server unreachable).
func (im *Importer) Import(ctx context.Context, file io.Reader) ([]Result, Summary, error) {
	if _, err := im.Client.DockeriosV1alpha1().MacOSIdentityPools().Get(ctx, im.Pool, metav1.GetOptions{}); err != nil {
		return nil, Summary{}, fmt.Errorf("MacOSIdentityPool %s: %w", im.Pool, err)
	}
	rows, rowErrs, err := identity.ParseRows(file)
	if err != nil {
		return nil, Summary{}, err
	}
	results := make([]Result, 0, len(rows)+len(rowErrs))
	for _, re := range rowErrs {
		results = append(results, Result{Line: re.Line, Serial: re.Serial, Outcome: Rejected, Reason: re.Reason})
	}
	byLine := func(a, b Result) int { return a.Line - b.Line }
	for _, row := range rows {
		r, err := im.importRow(ctx, row.Line, row.Values)
		if err != nil {
			// What was read is still reported in file order.
			slices.SortStableFunc(results, byLine)
			return results, summarize(results), err
		}
		results = append(results, r)
	}
	slices.SortStableFunc(results, byLine)
	return results, summarize(results), nil
}

// ImportValues creates one identity per element of values, exactly as
// Import does for the rows of a file: same names, same outcomes. A
// Result's Line is the 1-based position of its values in the slice.
// Values are expected valid and canonical (identity.Generator makes them
// so); the server refuses any that are not, and the row says why.
func (im *Importer) ImportValues(ctx context.Context, values []identity.Values) ([]Result, Summary, error) {
	if _, err := im.Client.DockeriosV1alpha1().MacOSIdentityPools().Get(ctx, im.Pool, metav1.GetOptions{}); err != nil {
		return nil, Summary{}, fmt.Errorf("MacOSIdentityPool %s: %w", im.Pool, err)
	}
	results := make([]Result, 0, len(values))
	for i, v := range values {
		r, err := im.importRow(ctx, i+1, v)
		if err != nil {
			return results, summarize(results), err
		}
		results = append(results, r)
	}
	return results, summarize(results), nil
}

func (im *Importer) importRow(ctx context.Context, line int, v identity.Values) (Result, error) {
	name := Name(im.Pool, v)
	res := Result{Line: line, Serial: v.SerialNumber, Identity: name}
	want := v1alpha1.MacOSIdentitySpec{
		PoolName: im.Pool, Model: v.Model, SerialNumber: v.SerialNumber, BoardSerialNumber: v.BoardSerialNumber,
		SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM,
	}
	var opts metav1.CreateOptions
	if im.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	identities := im.Client.DockeriosV1alpha1().MacOSIdentities()
	_, err := identities.Create(ctx, &v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: want}, opts)
	switch {
	case err == nil:
		res.Outcome = Created
	case apierrors.IsAlreadyExists(err):
		existing, getErr := identities.Get(ctx, name, metav1.GetOptions{})
		if getErr != nil {
			return res, stopped(line, getErr)
		}
		if existing.Spec == want {
			res.Outcome = AlreadyPresent
		} else {
			res.Outcome, res.Reason = Rejected, fmt.Sprintf("MacOSIdentity %s already exists with other values", name)
		}
	case apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		res.Outcome, res.Reason = Rejected, reason(err)
	default:
		return res, stopped(line, err)
	}
	return res, nil
}

// stopped is the error that ends an import at a line. The create may have
// reached the server before the failure (a Ctrl-C cancels the request, not
// the write): it says so, and that no later row was tried, so that the
// report above it is exact.
func stopped(line int, err error) error {
	return fmt.Errorf("line %d: %w (stopped here: this row may or may not have been created, no later row was tried; running again is safe)", line, err)
}

// reason says why the server refused a row: the field and what holds it,
// when the server said so.
func reason(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil && len(d.Causes) > 0 {
			var parts []string
			for _, c := range d.Causes {
				parts = append(parts, strings.TrimSpace(c.Field+": "+c.Message))
			}
			return strings.Join(parts, "; ")
		}
		return status.Status().Message
	}
	return err.Error()
}

func summarize(results []Result) Summary {
	var s Summary
	for _, r := range results {
		switch r.Outcome {
		case Created:
			s.Created++
		case AlreadyPresent:
			s.AlreadyPresent++
		case Rejected:
			s.Rejected++
		}
	}
	return s
}

// Print writes one line per row and the summary.
func Print(w io.Writer, results []Result, s Summary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LINE\tSERIAL\tIDENTITY\tRESULT\tREASON")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Line, orDash(r.Serial), orDash(r.Identity), r.Outcome, orDash(r.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d created, %d already present, %d rejected\n", s.Created, s.AlreadyPresent, s.Rejected)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
