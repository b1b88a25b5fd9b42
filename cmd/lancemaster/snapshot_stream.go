package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// `operator snapshot save -` and `restore -` (docs/cli.md): the file through
// stdout and stdin, for piping into encryption or object-store tools.

// stdoutIsTerminal reports whether w is a terminal: binary bytes there help
// nobody. A writer may say so itself (tests do).
func stdoutIsTerminal(w io.Writer) bool {
	if f, ok := w.(*formatWriter); ok {
		w = f.Writer // the output options' wrapper (output.go)
	}
	if t, ok := w.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// saveToStdout streams the snapshot file to stdout as it arrives and
// verifies it on the way, as a save to a file does afterwards: the header,
// the body's checksum and a full decode of the journal. Nothing but the
// file goes to stdout; the summary goes to stderr.
func saveToStdout(cmd *cobra.Command, g *globals, force bool) error {
	out := cmd.OutOrStdout()
	if stdoutIsTerminal(out) && !force {
		return usagef("refusing to write a snapshot to a terminal: redirect stdout (save - > FILE, or pipe it), or pass --force")
	}
	var (
		sw  *streamVerifier
		tr  *adminapi.TSnapshotTransfer
		ctr = &countingWriter{w: out}
	)
	err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
		if sw != nil {
			sw.abort()
		}
		sw = newStreamVerifier()
		// A retried save (NOT_LEADER at the first call) writes from the
		// start; once bytes have left, it cannot.
		reset := func() error {
			if ctr.n > 0 {
				return errors.New("snapshot save: the transfer restarted after bytes were written to stdout; discard them and save again")
			}
			return nil
		}
		tr, err = admin.DownloadSnapshot(ctx, c, io.MultiWriter(ctr, sw), reset)
		return err
	})
	if err != nil {
		sw.abort()
		if ctr.n > 0 {
			return fmt.Errorf("%w (%d bytes were already written to stdout: discard them)", err, ctr.n)
		}
		return err
	}
	h, st, err := sw.finish()
	if err != nil {
		return fmt.Errorf("snapshot save: the streamed file does not verify (%d bytes were written to stdout: discard them): %w", ctr.n, err)
	}
	if g.jsonOutput() {
		return printJSON(cmd.ErrOrStderr(), map[string]any{"file": "-", "size": ctr.n,
			"index": h.Raft.Index, "term": h.Raft.Term, "node_id": str(tr.NodeID),
			"jobs": jobCount(st), "catalogs": len(st.Catalogs()), "backends": len(st.Backends()),
			"body_sha256": h.BodySHA256})
	}
	_, err = fmt.Fprintf(cmd.ErrOrStderr(), "saved a snapshot at raft index %d, term %d (%d jobs, %d catalogs, %d backends; %d bytes) to stdout\n",
		h.Raft.Index, h.Raft.Term, jobCount(st), len(st.Catalogs()), len(st.Backends()), ctr.n)
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// streamVerifier checks a snapshot file written to it, on a goroutine: the
// header (ReadSnapshotFileHeader), the body's SHA-256, a full decode of
// the journal into a scratch FSM and that nothing follows the body.
type streamVerifier struct {
	pw   *io.PipeWriter
	done chan struct{}
	h    *cluster.SnapshotFileHeader
	st   *raftfsm.State
	err  error
}

func newStreamVerifier() *streamVerifier {
	pr, pw := io.Pipe()
	v := &streamVerifier{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(v.done)
		v.err = v.verify(pr)
		// Drain whatever is left so the writer never blocks.
		_, _ = io.Copy(io.Discard, pr)
	}()
	return v
}

func (v *streamVerifier) verify(r io.Reader) error {
	h, _, err := cluster.ReadSnapshotFileHeader(r)
	if err != nil {
		return err
	}
	sum := sha256.New()
	counted := &countingWriter{w: sum}
	body := io.TeeReader(io.LimitReader(r, h.BodySize), counted)
	scratch := raftfsm.New(nil)
	if err := scratch.Restore(io.NopCloser(body)); err != nil {
		return fmt.Errorf("the journal does not decode: %w", err)
	}
	// Restore may stop at its last item: the rest of the body (if any)
	// still goes through the checksum.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return err
	}
	if counted.n != h.BodySize {
		return fmt.Errorf("truncated: the body has %d of %d bytes", counted.n, h.BodySize)
	}
	var one [1]byte
	if k, _ := io.ReadFull(r, one[:]); k != 0 {
		return fmt.Errorf("unexpected bytes after the %d-byte body", h.BodySize)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.BodySHA256 {
		return fmt.Errorf("body checksum mismatch (sha256 %s, header says %s): the file is corrupted", got, h.BodySHA256)
	}
	v.h, v.st = h, scratch.State()
	return nil
}

// jobCount counts a state's jobs.
func jobCount(st *raftfsm.State) int {
	n := 0
	for after := int64(0); ; {
		recs, more := st.ListJobs(raftfsm.JobFilter{}, after, 4096)
		n += len(recs)
		if !more || len(recs) == 0 {
			return n
		}
		after = recs[len(recs)-1].JobID
	}
}

func (v *streamVerifier) Write(p []byte) (int, error) { return v.pw.Write(p) }

func (v *streamVerifier) abort() {
	if v != nil {
		_ = v.pw.CloseWithError(errors.New("aborted"))
		<-v.done
	}
}

func (v *streamVerifier) finish() (*cluster.SnapshotFileHeader, *raftfsm.State, error) {
	_ = v.pw.Close()
	<-v.done
	return v.h, v.st, v.err
}

// spoolStdin copies stdin into an unlinked-on-close temporary file (0600)
// of at most max bytes: a restore announces the file's size before its
// first chunk and verifies the whole file before it sends anything.
func spoolStdin(in io.Reader, max int64) (*os.File, error) {
	tmp, err := os.CreateTemp("", "lancemaster-restore-*.snap")
	if err != nil {
		return nil, err
	}
	// Removed at once: the open descriptor keeps it readable until Close.
	_ = os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(in, max+1))
	if err == nil && n > max {
		err = fmt.Errorf("stdin holds more than %d bytes, the largest snapshot a master accepts; nothing was sent", max)
	}
	if err == nil && n == 0 {
		err = errors.New("stdin is empty; nothing was sent")
	}
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = tmp.Close()
		return nil, err
	}
	return tmp, nil
}
