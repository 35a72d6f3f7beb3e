package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/spf13/cobra"
)

// newEvidenceCheckCmd is `capmesh evidence check DIR [--repair]`: an
// offline check of a host's durable evidence store (evidence/logstore).
func newEvidenceCheckCmd(a *app) *cobra.Command {
	var repair, asJSON bool
	cmd := &cobra.Command{
		Use:   "check DIR",
		Short: "Check a host's evidence store for damage; --repair keeps what verifies",
		Long: `Check the durable evidence store in DIR (the directory holding evidence.log,
or that file itself) without changing it: which records verify, which bytes
are damaged and what the damaged records claim to be, which sequences are
lost, which correlations' chains miss a link (and so are not provable from
their genesis), and any torn tail (a final write cut short by a crash, which
the host cuts off by itself at its next start).

A host refuses to open a store with damage before records that verify.
--repair moves each damaged run of bytes aside into
evidence.log.damaged-<offset> beside the log (nothing is deleted), keeps
every record that verifies, and records each loss in the log (a gap record).
Stop the host first: check and repair take the store's lock.

Exit status: 0 no damage (or repaired), 1 damaged, 2 usage.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := storeDir(args[0])
			if err != nil {
				return err
			}
			var r *logstore.Report
			if repair {
				r, err = logstore.Repair(dir, nil)
			} else {
				r, err = logstore.Check(dir)
			}
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.MarshalIndent(r, "", "  ")
				fmt.Fprintln(a.stdout, string(b))
			} else {
				printCheck(a.stdout, r, dir)
			}
			if r.IsDamaged() && !r.Repaired {
				return silentExit(exitFailure)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&repair, "repair", false, "move damaged bytes aside and keep every record that verifies")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// storeDir resolves the DIR argument: a store directory, or its log file.
func storeDir(arg string) (string, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return "", usageErrorf("%v", err)
	}
	dir := arg
	if !st.IsDir() {
		if filepath.Base(arg) != logstore.FileName {
			return "", usageErrorf("%s: not a store directory or its %s", arg, logstore.FileName)
		}
		dir = filepath.Dir(arg)
	}
	if _, err := os.Stat(filepath.Join(dir, logstore.FileName)); errors.Is(err, os.ErrNotExist) {
		return "", usageErrorf("%s: no %s here (not an evidence store)", dir, logstore.FileName)
	}
	return dir, nil
}

// printCheck writes the report for a reader: what verifies, each finding,
// then a verdict line.
func printCheck(w io.Writer, r *logstore.Report, dir string) {
	fmt.Fprintf(w, "%s: %d bytes, %d records verify", r.Path, r.Size, r.Records)
	if r.Records > 0 {
		fmt.Fprintf(w, " (sequences %d-%d)", r.FirstSequence, r.LastSequence)
	}
	fmt.Fprintf(w, ", %d results, %d correlations\n", r.Results, r.Correlations)
	for _, d := range r.Damaged {
		what := lost(d.After+1, d.Next-1)
		if d.Next == 0 {
			what = fmt.Sprintf("sequences from %d on lost, if it held any (no evidence record follows)", d.After+1)
		}
		fmt.Fprintf(w, "DAMAGED offset %d, %d bytes (%s): %s\n", d.Offset, d.Length, d.Reason, what)
		for _, c := range d.Claims {
			if c.Sequence == 0 {
				fmt.Fprintf(w, "  offset %d claims to be a result record (unverified)\n", c.Offset)
				continue
			}
			fmt.Fprintf(w, "  offset %d claims sequence %d of %s, %s (unverified)\n", c.Offset, c.Sequence, c.CorrelationID, c.EventType)
		}
	}
	for _, g := range r.Gaps {
		fmt.Fprintf(w, "gap at offset %d: %s, recorded %s (%s)\n", g.Offset, lost(g.After+1, g.Next-1), g.At.Format("2006-01-02T15:04:05Z"), g.Note)
	}
	if t := r.Tail; t != nil {
		fmt.Fprintf(w, "torn tail at offset %d, %d bytes (%s): a final write cut short; the next open cuts it off and keeps it in %s.torn-%d\n",
			t.Offset, t.Length, t.Reason, logstore.FileName, t.Offset)
	}
	for _, b := range r.Broken {
		fmt.Fprintf(w, "chain broken: %s from sequence %d (a link is missing: its records from there on are not provable from its genesis)\n", b.CorrelationID, b.Sequence)
	}
	fmt.Fprintf(w, "provable from genesis: %d of %d correlations\n", r.Correlations-len(r.Broken), r.Correlations)
	switch {
	case r.Repaired:
		fmt.Fprintln(w, "REPAIRED: every record that verifies was kept")
		for _, p := range r.Preserved {
			fmt.Fprintf(w, "  moved aside: %s\n", p)
		}
	case r.IsDamaged():
		fmt.Fprintf(w, "DAMAGED: a host refuses this store; `capmesh evidence check --repair %s` moves the damaged bytes aside and keeps every record that verifies\n", dir)
	default:
		fmt.Fprintln(w, "OK: no damage")
	}
}

// lost describes the evidence sequences from..to lost (none when to < from).
func lost(from, to uint64) string {
	switch {
	case to < from:
		return "no evidence sequence lost"
	case from == to:
		return fmt.Sprintf("sequence %d lost", from)
	}
	return fmt.Sprintf("sequences %d-%d lost", from, to)
}
