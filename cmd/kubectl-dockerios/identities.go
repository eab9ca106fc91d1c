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
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	clientset "github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/identityimport"
)

func newImportCommand(o *options) *cobra.Command {
	var pool string
	cmd := &cobra.Command{
		Use:   "import --pool POOL FILE",
		Short: "Import a serial-set file (osx-serial-generator CSV or TSV) into an identity pool",
		Long: `Import creates one MacOSIdentity per row of FILE in the pool, named
<pool>-<16 hex digits of a sha256 of the row's five values>: anyone who may
read a machine sees the name of its identity, so the name says no value.
Each row is reported: created, already present (the same identity exists),
or rejected with the reason (a malformed value, or a value another identity
already holds). Re-running on the same file changes nothing. The exit status
is 1 when any row was rejected.

FILE is a serial set as osx-serial-generator's
generate-unique-machine-values.sh writes it: one identity a line, no header,
CSV or TSV (TSV when the first line has a tab). Eight columns, in this
order:

  DEVICE_MODEL   SMBIOS model, the pool's (iMacPro1,1)
  SERIAL         system serial number, 12 characters (C02CK029HX87)
  BOARD_SERIAL   main logic board serial (MLB), 17 characters
  UUID           system UUID (4B408A88-4062-4532-9AA1-3D8A3549327F)
  MAC_ADDRESS    unicast, from one of Apple's OUIs (34:31:8F:D3:88:E4)
  WIDTH, HEIGHT  display size in pixels
  KERNEL_ARGS    extra boot-args; may be empty, or the column left out

  "iMacPro1,1","C02CK029HX87","C02015700QXJG36CB","4B408A88-4062-4532-9AA1-3D8A3549327F","34:31:8F:D3:88:E4","1920","1080",""

The ROM is not in the file: it is the MAC address's six bytes. WIDTH,
HEIGHT and KERNEL_ARGS are checked but not imported (a machine's display
comes from its class). Unquoted fields, a first line naming the columns,
blank lines, a UTF-8 byte order mark and CRLF line ends are accepted, as
files edited by hand or by a spreadsheet have them.`,
		Example: `  # Make a serial set with osx-serial-generator, then import it
  ./generate-unique-machine-values.sh --count 50 --model iMacPro1,1 --csv serials.csv
  kubectl dockerios identities import --pool imacpro serials.csv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.newClient()
			if err != nil {
				return err
			}
			return importFile(cmd.Context(), client, pool, args[0], cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "The MacOSIdentityPool to import into (required).")
	_ = cmd.MarkFlagRequired("pool")
	_ = cmd.RegisterFlagCompletionFunc("pool", o.completeIdentityPools)
	return cmd
}

// importFile imports the serial set at path into pool and prints what
// became of each row.
func importFile(ctx context.Context, client clientset.Interface, pool, path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	im := &identityimport.Importer{Client: client, Pool: pool}
	results, summary, err := im.Import(ctx, f)
	return report(out, results, summary, err, "")
}

// report prints what became of each row and the summary, and turns
// rejected rows into the error that makes the exit status 1.
func report(out io.Writer, results []identityimport.Result, summary identityimport.Summary, err error, note string) error {
	// An import that stopped before any row (no such pool, an unreadable
	// file) has nothing to report but the error; an empty table above it
	// would read as a file without rows.
	if err != nil && len(results) == 0 {
		return err
	}
	if perr := identityimport.Print(out, results, summary); perr != nil && err == nil {
		err = perr
	}
	if note != "" {
		fmt.Fprintln(out, note)
	}
	if err != nil {
		return err
	}
	if summary.Rejected > 0 {
		return fmt.Errorf("%d of %d rows rejected", summary.Rejected, len(results))
	}
	return nil
}

// Dry-run modes, as kubectl names them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

type generateOptions struct {
	*options
	pool  string
	count int
	seed  int64
	// randomSeed is set when --seed was not given.
	randomSeed bool
	dryRun     string
	out        *output
}

// csvFormat is generate's own -o: the identities as a serial set.
const csvFormat = "csv"

func newGenerateCommand(o *options) *cobra.Command {
	g := &generateOptions{options: o}
	cmd := &cobra.Command{
		Use:   "generate --pool POOL --count N",
		Short: "Make synthetic identities for a test or demo identity pool",
		Long: `Generate makes N identities of the pool's model with DockerIOS's generator
(pkg/identity) and creates them as import does: each named <pool>-<16 hex
digits of a sha256 of its values>, each reported as created, already
present or rejected with the reason. The exit status is 1 when any was
rejected.

The identities are synthetic: well-formed, unique among themselves, and
they pass every check the apiserver makes, but they are not macserial's.
Their serials do not use the model's real codes, and their MAC addresses,
though in Apple's OUIs, may be those of real Apple devices. Use them in
test and demo clusters. Never give them to a Mac that talks to Apple:
import a serial set made by osx-serial-generator for those (identities
import).

--seed decides the values: the same seed, model and count give the same
identities, so running again changes nothing (every row already present).
Without --seed a random seed is used, and printed on stderr. Whether a value
is unique across the fleet is the apiserver's to say: it refuses an identity
holding a value another one holds (409, naming the holder), and that row is
reported rejected.

--dry-run=server has the apiserver check every identity, uniqueness
included, and store nothing; --dry-run=client creates nothing (it only
reads the pool, for its model). -o csv prints
the identities as a serial set, in the CSV osx-serial-generator writes and
identities import reads; -o json, yaml or name print them as MacOSIdentity
objects. Rejected identities are left out of those, and said on stderr.`,
		Example: `  # Eight identities for the demo pool
  kubectl dockerios identities generate --pool demo --count 8

  # A serial set of 50 to import elsewhere; nothing is created
  kubectl dockerios identities generate --pool imacpro --count 50 --seed 7 --dry-run=client -o csv > serials.csv`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g.randomSeed = !cmd.Flags().Changed("seed")
			return g.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&g.pool, "pool", "", "The MacOSIdentityPool to fill (required).")
	cmd.Flags().IntVar(&g.count, "count", 0, "How many identities to make (required).")
	cmd.Flags().Int64Var(&g.seed, "seed", 0, "Seed of the values; the same seed gives the same identities. Random when not given.")
	cmd.Flags().StringVar(&g.dryRun, "dry-run", dryRunNone, `"none" creates the identities; "server" has the apiserver check them and store nothing; "client" creates nothing.`)
	_ = cmd.MarkFlagRequired("pool")
	_ = cmd.MarkFlagRequired("count")
	_ = cmd.RegisterFlagCompletionFunc("pool", o.completeIdentityPools)
	_ = cmd.RegisterFlagCompletionFunc("dry-run", completeFixed(dryRunNone, dryRunServer, dryRunClient))
	g.out = addOutputFlags(cmd, csvFormat)
	return cmd
}

func (g *generateOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if g.count < 1 || g.count > identity.MaxRows {
		return fmt.Errorf("--count must be between 1 and %d", identity.MaxRows)
	}
	switch g.dryRun {
	case dryRunNone, dryRunClient, dryRunServer:
	default:
		return fmt.Errorf(`--dry-run must be "none", "server" or "client", not %q`, g.dryRun)
	}
	if err := g.out.validate(); err != nil {
		return err
	}
	client, err := g.newClient()
	if err != nil {
		return err
	}
	pool, err := client.DockeriosV1alpha1().MacOSIdentityPools().Get(ctx, g.pool, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("MacOSIdentityPool %s: %w", g.pool, err)
	}
	// The server validated the model when the pool was made; the
	// generator panics on a bad one, so say it rather than crash.
	if err := identity.ValidateModel(pool.Spec.Model); err != nil {
		return fmt.Errorf("MacOSIdentityPool %s: model %q %v", g.pool, pool.Spec.Model, err)
	}
	fmt.Fprintln(stderr, "Warning: generated identities are synthetic: for test and demo clusters, never for a Mac that talks to Apple")
	if g.randomSeed {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		// Non-negative, so that it can be given back as --seed as printed.
		g.seed = int64(binary.BigEndian.Uint64(b[:]) >> 1)
		fmt.Fprintf(stderr, "Using --seed %d (the same seed makes the same identities)\n", g.seed)
	}
	gen := identity.NewGenerator(g.seed, pool.Spec.Model)
	values := make([]identity.Values, g.count)
	for i := range values {
		values[i] = gen.Next()
	}

	var results []identityimport.Result
	var summary identityimport.Summary
	note := ""
	switch g.dryRun {
	case dryRunClient:
		for i, v := range values {
			results = append(results, identityimport.Result{Line: i + 1, Serial: v.SerialNumber,
				Identity: identityimport.Name(g.pool, v), Outcome: "generated"})
		}
		if g.out.human() {
			return printGenerated(stdout, results)
		}
	default:
		im := &identityimport.Importer{Client: client, Pool: g.pool, DryRun: g.dryRun == dryRunServer}
		results, summary, err = im.ImportValues(ctx, values)
		if g.dryRun == dryRunServer {
			note = "(server dry run: the apiserver checked each identity and stored none)"
		}
	}
	if g.out.human() {
		return report(stdout, results, summary, err, note)
	}
	// An import that stopped before any identity has nothing to print.
	if err != nil && len(results) == 0 {
		return err
	}
	// Machine-readable output holds the identities that are (or would be)
	// in the pool, those made before an error that stopped the run
	// included; the rest are errors, on stderr.
	var kept []identity.Values
	errs := []error{err}
	for i, r := range results {
		if r.Outcome == identityimport.Rejected {
			errs = append(errs, fmt.Errorf("identity %d (serial %s) rejected: %s", r.Line, r.Serial, r.Reason))
			continue
		}
		kept = append(kept, values[i])
	}
	if g.out.format() == csvFormat {
		err = writeSerialSet(stdout, kept)
	} else {
		list := &v1alpha1.MacOSIdentityList{}
		for _, v := range kept {
			list.Items = append(list.Items, identityObject(g.pool, v))
		}
		err = g.out.print(list, stdout)
	}
	return errors.Join(append([]error{err}, errs...)...)
}

// printGenerated prints what a client dry run made: the rows, and that
// none was created.
func printGenerated(w io.Writer, results []identityimport.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LINE\tSERIAL\tIDENTITY")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", r.Line, r.Serial, r.Identity)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d generated, none created (client dry run)\n", len(results))
	return err
}

func identityObject(pool string, v identity.Values) v1alpha1.MacOSIdentity {
	return v1alpha1.MacOSIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: identityimport.Name(pool, v)},
		Spec: v1alpha1.MacOSIdentitySpec{PoolName: pool, Model: v.Model, SerialNumber: v.SerialNumber,
			BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
	}
}

// writeSerialSet writes values as osx-serial-generator writes a serial
// set: every field quoted, a display of 1920x1080 (not imported: a
// machine's display comes from its class), no kernel arguments.
func writeSerialSet(w io.Writer, values []identity.Values) error {
	for _, v := range values {
		fields := []string{v.Model, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress, "1920", "1080", ""}
		if _, err := fmt.Fprintf(w, "\"%s\"\n", strings.Join(fields, `","`)); err != nil {
			return err
		}
	}
	return nil
}
