package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// snapshotTimeout is save's and restore's --timeout when none is given: a
// transfer of a large journal takes longer than an ordinary call.
const snapshotTimeout = 10 * time.Minute

func newSnapshotCmd(g *globals) *cobra.Command {
	return groupCmd("snapshot", "Save, restore and inspect snapshots of the journal",
		newSnapshotSaveCmd(g),
		newSnapshotRestoreCmd(g),
		newSnapshotInspectCmd(g),
	)
}

// snapshotDefaults gives save and restore their longer default timeout.
func snapshotDefaults(cmd *cobra.Command, g *globals) {
	if f := cmd.Flags().Lookup("timeout"); f != nil && !f.Changed {
		g.timeout = snapshotTimeout
	}
}

func newSnapshotSaveCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "save FILE|-",
		Short: "Save a consistent snapshot of the journal from the leader to FILE",
		Long: "Save asks the leader for a consistent snapshot of the journal (every write committed\n" +
			"before the command is in it) and writes it to FILE atomically: a temporary file in the\n" +
			"same directory, fsynced, verified (checksums and a full decode), then renamed. The file\n" +
			"holds invocation secrets, like the masters' data dirs: it is created 0600; keep it as\n" +
			"carefully. Storage credentials are never in it. The default --timeout is 10m.\n" +
			"FILE \"-\" streams the file to stdout (for an encryption or object-store tool; messages go\n" +
			"to stderr), verified as it passes: a file that does not verify ends the command with exit 1\n" +
			"after its bytes were written, so run it under `set -o pipefail`. It refuses a terminal\n" +
			"as stdout unless --force is given.",
		Example: "  lancemaster operator snapshot save /backup/lancemaster-$(date +%F).snap\n" +
			"  lancemaster operator snapshot save - | age -r $RECIPIENT > lancemaster.snap.age",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			snapshotDefaults(cmd, g)
			if args[0] == "-" {
				return saveToStdout(cmd, g, force)
			}
			path := args[0]
			if err := checkWritableDir("FILE", path); err != nil {
				return err
			}
			dir := filepath.Dir(path)
			tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // 0600
			if err != nil {
				return fmt.Errorf("snapshot save: %w", err)
			}
			keep := false
			defer func() {
				if !keep {
					_ = tmp.Close()
					_ = os.Remove(tmp.Name())
				}
			}()
			reset := func() error {
				if err := tmp.Truncate(0); err != nil {
					return err
				}
				_, err := tmp.Seek(0, io.SeekStart)
				return err
			}
			var tr *adminapi.TSnapshotTransfer
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				tr, err = admin.DownloadSnapshot(ctx, c, tmp, reset)
				return err
			}); err != nil {
				return err
			}
			if err := tmp.Sync(); err != nil {
				return fmt.Errorf("snapshot save: %w", err)
			}
			insp, err := cluster.InspectSnapshotFile(tmp)
			if err != nil {
				return fmt.Errorf("snapshot save: the received file does not verify (nothing was written to %s): %w", path, err)
			}
			if err := tmp.Close(); err != nil {
				return fmt.Errorf("snapshot save: %w", err)
			}
			if err := os.Rename(tmp.Name(), path); err != nil {
				return fmt.Errorf("snapshot save: %w", err)
			}
			keep = true
			if err := syncDir(dir); err != nil {
				return fmt.Errorf("snapshot save: %s is written, but its directory was not fsynced: %w", path, err)
			}
			out := cmd.OutOrStdout()
			if g.jsonOutput() {
				return printJSON(out, map[string]any{"file": path, "size": insp.FileSize,
					"index": insp.Header.Raft.Index, "term": insp.Header.Raft.Term, "node_id": str(tr.NodeID),
					"jobs": insp.Journal.Jobs, "catalogs": insp.Journal.Catalogs, "backends": insp.Journal.Backends,
					"body_sha256": insp.Header.BodySHA256})
			}
			_, err = fmt.Fprintf(out, "saved a snapshot at raft index %d, term %d (%d jobs, %d catalogs, %d backends; %d bytes) to %s\n",
				insp.Header.Raft.Index, insp.Header.Raft.Term, insp.Journal.Jobs, insp.Journal.Catalogs,
				insp.Journal.Backends, insp.FileSize, sanitize(path))
			return err
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "with FILE \"-\": write the snapshot to stdout even when it is a terminal")
	return cmd
}

func newSnapshotRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "restore FILE|-",
		Annotations: writeCommand(),
		Short:       "Replace the whole journal with the snapshot in FILE",
		Long: "Restore verifies FILE here, uploads it to the leader, which verifies it again (checksums,\n" +
			"format versions, a full decode) before it replaces the journal of every master with it\n" +
			"through Raft. A file that fails verification changes nothing. Everything written after\n" +
			"the snapshot was taken is gone; jobs keep their ids and states as in the file, except that a\n" +
			"job this cluster's journal knows at a later state keeps that state (a dispatch is never\n" +
			"forgotten), and a PENDING, RUNNING or RESOLVING job nothing vouches for (another cluster's\n" +
			"file, a job the journal no longer has) is held: never dispatched again (jobs list --held). The leader\n" +
			"then pauses the dispatcher (lance_index_job_dispatcher_paused=true), keeps the cluster id\n" +
			"of this cluster and hands leadership over, so the leader services restart from the\n" +
			"restored state. Check what the file brought back as RUNNING (jobs list --restored), then\n" +
			"resume with `lancemaster config set lance_index_job_dispatcher_paused false`.\n" +
			"See docs/operations.md before using it. The default --timeout is 10m.\n" +
			"FILE \"-\" reads the file from stdin: it is spooled to a temporary file (0600, removed\n" +
			"afterwards; at most the largest snapshot a master accepts), verified, then uploaded.",
		Example: "  lancemaster operator snapshot restore /backup/lancemaster-2026-01-31.snap\n" +
			"  age -d -i key.txt lancemaster.snap.age | lancemaster operator snapshot restore -",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			snapshotDefaults(cmd, g)
			var f *os.File
			var err error
			if args[0] == "-" {
				f, err = spoolStdin(cmd.InOrStdin(), cluster.MaxSnapshotFileSize)
			} else if err = checkReadable("FILE", args[0]); err == nil {
				f, err = os.Open(args[0])
			}
			if err != nil {
				return fmt.Errorf("snapshot restore: %w", err)
			}
			defer f.Close()
			insp, err := cluster.InspectSnapshotFile(f)
			if err != nil {
				return fmt.Errorf("snapshot restore: nothing was sent: %w", err)
			}
			var resp *adminapi.TSnapshotRestoreResponse
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return err
				}
				resp, err = admin.UploadSnapshot(ctx, c, f, insp.FileSize, g.claim())
				return err
			}); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.jsonOutput() {
				return printJSON(out, resp)
			}
			_, err = fmt.Fprintf(out, "restored the snapshot of raft index %d, term %d (%s jobs, %s catalogs, %s backends); "+
				"the journal now continues from index %d; leader: %s\n"+
				"the dispatcher is paused (%s=true): nothing is dispatched until you resume it.\n"+
				"check the jobs the file brought back as RUNNING: lancemaster jobs list --restored --all\n"+
				"then resume: lancemaster config set %s false\n",
				resp.SnapshotIndex, resp.SnapshotTerm, i64(resp.JobCount), i64(resp.CatalogCount), i64(resp.BackendCount),
				resp.Index, sanitize(str(resp.LeaderID)), options.OptDispatcherPaused, options.OptDispatcherPaused)
			if err == nil && resp.GetCarriedForward() > 0 {
				_, err = fmt.Fprintf(out, "%s the newer record this cluster's journal had (a dispatch, a result)\n",
					jobsCount(resp.GetCarriedForward(), "job kept", "jobs kept"))
			}
			if err == nil && resp.GetHeld() > 0 {
				_, err = fmt.Fprintf(out, "%s held: nothing vouches for what happened after the file was saved, so held jobs are "+
					"never dispatched again.\nlist them: lancemaster jobs list --held --all; cancel a PENDING one (lancemaster jobs cancel ID), "+
					"check its dataset, then admit the work again if it is still needed\n", jobsCount(resp.GetHeld(), "job was", "jobs were"))
			}
			return err
		},
	}
}

func newSnapshotInspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "Verify a snapshot file and describe it (offline: no master is needed)",
		Long: "Inspect verifies FILE's checksums and decodes the journal in it, then prints the format\n" +
			"versions, the raft index and term, the counts of jobs, catalogs and backends, the last ids,\n" +
			"the options set and the jobs per state. It exits 1 when the file does not verify.",
		Example: "  lancemaster operator snapshot inspect /backup/lancemaster-2026-01-31.snap -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReadable("FILE", args[0]); err != nil {
				return err
			}
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("snapshot inspect: %w", err)
			}
			defer f.Close()
			insp, err := cluster.InspectSnapshotFile(f)
			if err != nil {
				return fmt.Errorf("snapshot inspect: %w", err)
			}
			out := cmd.OutOrStdout()
			if g.jsonOutput() {
				return printJSON(out, insp)
			}
			return printInspection(out, args[0], insp)
		},
	}
}

func printInspection(out io.Writer, path string, insp *cluster.SnapshotInspection) error {
	h, j := insp.Header, insp.Journal
	var conf []string
	for _, s := range h.Raft.Configuration {
		conf = append(conf, fmt.Sprintf("%s %s %s", s.ID, s.Address, s.Suffrage))
	}
	var opts []string
	for _, k := range cluster.SortedKeys(j.Options) {
		opts = append(opts, k+"="+j.Options[k])
	}
	kvs := [][2]string{
		{"file", fmt.Sprintf("%s (%d bytes)", path, insp.FileSize)},
		{"format version", strconv.Itoa(h.FormatVersion)},
		{"checksums", "verified (sha256 " + h.BodySHA256 + ")"},
		{"taken", timeMsExact(h.CreatedUnixMs) + " on " + h.NodeID},
		{"raft index", strconv.FormatUint(h.Raft.Index, 10)},
		{"raft term", strconv.FormatUint(h.Raft.Term, 10)},
		{"raft configuration", orDash(strings.Join(conf, ", "))},
		{"journal format", strconv.Itoa(int(j.FormatVersion))},
		{"applied index", strconv.FormatInt(j.AppliedIndex, 10)},
		{"jobs", strconv.FormatInt(j.Jobs, 10)},
		{"catalogs", strconv.FormatInt(j.Catalogs, 10)},
		{"backends", strconv.FormatInt(j.Backends, 10)},
		{"last ids", fmt.Sprintf("job %d, catalog %d, backend %d", j.LastJobID, j.LastCatalogID, j.LastBackendID)},
		{"options set", orDash(strings.Join(opts, ", "))},
	}
	if err := printKeyValues(out, kvs); err != nil {
		return err
	}
	rows := [][]string{}
	for _, s := range cluster.SortedKeys(j.JobStates) {
		rows = append(rows, []string{"mutation", s, strconv.FormatInt(j.JobStates[s], 10)})
	}
	for _, s := range cluster.SortedKeys(j.RefreshStates) {
		rows = append(rows, []string{"refresh", s, strconv.FormatInt(j.RefreshStates[s], 10)})
	}
	if len(rows) == 0 {
		return nil
	}
	if _, err := io.WriteString(out, "\n"); err != nil {
		return err
	}
	return printTable(out, []string{"STATE MACHINE", "STATE", "JOBS"}, rows)
}

func orDash(s string) string {
	if s == "" {
		return dash
	}
	return s
}

// syncDir fsyncs a directory, so a rename in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, os.ErrInvalid) {
		return nil // a filesystem that cannot sync directories
	}
	return err
}

// jobsCount is "1 <one>" or "N <many>".
func jobsCount(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
