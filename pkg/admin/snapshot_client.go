package admin

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// The client side of snapshot transfers (snapshot.go), for the CLI and
// tests. Both run every call of a transfer on the one client given, so
// they reach the master holding the transfer; run them inside
// rpc.MasterClient.Call, which re-runs them on the leader after a
// NOT_LEADER answer to the first call (the writer must then start over:
// DownloadSnapshot calls reset first).

// DownloadSnapshot saves a snapshot from the leader c reaches and writes
// the file to w, from its start. reset, when set, is called before anything
// is written (to truncate a file a previous attempt wrote to). It returns
// the transfer's description (size, index, term).
func DownloadSnapshot(ctx context.Context, c *adminapi.LanceMasterServiceClient, w io.Writer, reset func() error) (*adminapi.TSnapshotTransfer, error) {
	tr, err := c.BeginSnapshotSave(ctx)
	if err != nil {
		return nil, err
	}
	if reset != nil {
		if err := reset(); err != nil {
			abortTransfer(ctx, c, tr.TransferID)
			return nil, err
		}
	}
	var off int64
	for {
		ch, err := c.ReadSnapshotChunk(ctx, tr.TransferID, off)
		if err != nil {
			if answered(err) {
				abortTransfer(ctx, c, tr.TransferID)
			}
			return nil, err
		}
		switch {
		case ch.Offset != off:
			err = fmt.Errorf("snapshot save: the master sent offset %d, expected %d", ch.Offset, off)
		case int64(len(ch.Data)) > tr.Size-off:
			err = fmt.Errorf("snapshot save: the master sent more than the %d bytes announced", tr.Size)
		case len(ch.Data) == 0 && !ch.GetEOF():
			err = errors.New("snapshot save: the master sent an empty chunk")
		}
		if err != nil {
			abortTransfer(ctx, c, tr.TransferID)
			return nil, err
		}
		if _, err := w.Write(ch.Data); err != nil {
			abortTransfer(ctx, c, tr.TransferID)
			return nil, err
		}
		off += int64(len(ch.Data))
		if ch.GetEOF() {
			break
		}
	}
	if off != tr.Size {
		return nil, fmt.Errorf("snapshot save: received %d of %d bytes", off, tr.Size)
	}
	return tr, nil
}

// UploadSnapshot uploads size bytes of a snapshot file from r to the leader
// c reaches and restores it. r must deliver the file from its start (seek
// it back before a re-run). actor is the name the caller claims (--as; ""
// none), which the restore's audit event records.
func UploadSnapshot(ctx context.Context, c *adminapi.LanceMasterServiceClient, r io.Reader, size int64, actor string) (*adminapi.TSnapshotRestoreResponse, error) {
	tr, err := c.BeginSnapshotRestore(ctx, size)
	if err != nil {
		return nil, err
	}
	chunk := int64(SnapshotChunkSize)
	if cs := int64(tr.ChunkSize); cs > 0 && cs < chunk {
		chunk = cs
	}
	buf := make([]byte, chunk)
	for off := int64(0); off < size; {
		n, err := io.ReadFull(r, buf[:min(chunk, size-off)])
		if err != nil {
			abortTransfer(ctx, c, tr.TransferID)
			return nil, fmt.Errorf("read the snapshot file: %w", err)
		}
		if err := c.WriteSnapshotChunk(ctx, &adminapi.TSnapshotChunk{TransferID: tr.TransferID, Offset: off, Data: buf[:n]}); err != nil {
			if answered(err) {
				abortTransfer(ctx, c, tr.TransferID)
			}
			return nil, err
		}
		off += int64(n)
	}
	return c.FinishSnapshotRestore(ctx, tr.TransferID, actor)
}

// abortTransfer tells the master to drop a transfer, best effort. Callers
// skip it after a transport error (the connection is then unusable; the
// master drops the transfer once idle).
func abortTransfer(ctx context.Context, c *adminapi.LanceMasterServiceClient, id string) {
	_ = c.AbortSnapshotTransfer(ctx, id)
}

// answered reports whether err is a typed answer of the master, after which
// the connection is still in step.
func answered(err error) bool {
	var ae *adminapi.TAdminError
	return errors.As(err, &ae)
}
