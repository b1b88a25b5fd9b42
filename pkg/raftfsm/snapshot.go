package raftfsm

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/ordtree"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Snapshot format (idl/journal.thrift): the magic "LMSNAP", a 4-byte
// big-endian length and the compact TSnapshotHeader, then length-prefixed
// compact TSnapshotItem values — catalogs, backends, jobs, each in id order —
// and an item with last = true. Everything is written in a fixed order from
// one immutable view, so two replicas that applied the same log write the
// same bytes. Books are not in it: Restore rebuilds them with book.
const (
	snapshotMagic         = "LMSNAP"
	SnapshotFormatVersion = 1
	// maxSnapshotFrame bounds one header or item, so a corrupt length cannot
	// make Restore allocate gigabytes. A job record is at most ~90 KiB.
	maxSnapshotFrame = 16 << 20
	snapshotBuffer   = 1 << 20
)

// ErrSnapshotFormat: the stream is not a snapshot this master can read.
var ErrSnapshotFormat = errors.New("raftfsm: unreadable snapshot")

// Snapshot captures the current view; Persist streams it later without
// holding anything that Apply needs (the view is immutable).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) { return &fsmSnapshot{s: f.State()}, nil }

type fsmSnapshot struct{ s *State }

// Persist writes the snapshot to sink and closes it, or cancels it on error.
// It runs concurrently with Apply.
func (p *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := p.s.WriteSnapshot(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release is a no-op: the view is garbage once nothing references it.
func (p *fsmSnapshot) Release() {}

// WriteSnapshot writes this view in the snapshot format (what Persist
// streams; exported for tools and tests). The stream carries invocation
// secrets, like the Raft log: keep it where the log is kept.
func (s *State) WriteSnapshot(w io.Writer) error {
	sw := newSnapshotWriter(w)
	if err := sw.frame(snapshotHeader(s.m)); err != nil {
		return err
	}
	var err error
	emit := func(item *journal.TSnapshotItem) bool {
		err = sw.frame(item)
		return err == nil
	}
	s.t.catalogs.Ascend(nil, func(c *Catalog) bool {
		return emit(&journal.TSnapshotItem{Catalog: CatalogToThrift(c)})
	})
	if err == nil {
		s.t.backends.Ascend(nil, func(b *Backend) bool {
			return emit(&journal.TSnapshotItem{Backend: BackendToThrift(b)})
		})
	}
	if err == nil {
		// One holder for every job: the million-job stream allocates nothing per job.
		var w jobcodec.Wire
		var scratch job.Record
		item := &journal.TSnapshotItem{}
		s.t.jobs[ixID].Ascend(nil, func(r *row) bool {
			item.Job = w.Load(r.recordInto(&scratch))
			return emit(item)
		})
	}
	if err == nil {
		s.writeAuditItems(emit)
	}
	if err != nil {
		return err
	}
	if err := sw.frame(&journal.TSnapshotItem{Last: thrift.BoolPtr(true)}); err != nil {
		return err
	}
	return sw.flush()
}

func snapshotHeader(m *meta) *journal.TSnapshotHeader {
	keys := make([]string, 0, len(m.options))
	for k := range m.options {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	opts := make([]*journal.TOptionValue, 0, len(keys))
	for _, k := range keys {
		opts = append(opts, optionValueOf(m, k))
	}
	ids := slices.Sorted(maps.Keys(m.members))
	var members []*journal.TMemberAddress
	for _, id := range ids {
		members = append(members, &journal.TMemberAddress{NodeID: id, RPCAddress: m.members[id]})
	}
	return &journal.TSnapshotHeader{
		MemberAddresses: members,
		FormatVersion:   SnapshotFormatVersion,
		LastJobID:       m.lastJobID,
		LastCatalogID:   m.lastCatalogID,
		LastBackendID:   m.lastBackendID,
		Options:         opts,
		JobCount:        thrift.Int64Ptr(m.jobs),
		CatalogCount:    thrift.Int64Ptr(m.catalogs),
		BackendCount:    thrift.Int64Ptr(m.backends),
		AppliedIndex:    thrift.Int64Ptr(int64(m.appliedIndex)),
		ClusterID:       jobcodec.OptString(&m.clusterID),
		LastAuditSeq:    jobcodec.OptInt64(&m.audit.lastSeq),
	}
}

// snapshotWriter writes the magic, then length-prefixed compact frames.
type snapshotWriter struct {
	w       *bufio.Writer
	scratch *thrift.TMemoryBuffer
	proto   *thrift.TCompactProtocol
	started bool
}

func newSnapshotWriter(w io.Writer) *snapshotWriter {
	scratch := thrift.NewTMemoryBufferLen(4096)
	return &snapshotWriter{
		w:       bufio.NewWriterSize(w, snapshotBuffer),
		scratch: scratch,
		proto:   thrift.NewTCompactProtocolConf(scratch, thriftConf),
	}
}

func (sw *snapshotWriter) frame(s thrift.TStruct) error {
	if !sw.started {
		sw.started = true
		if _, err := sw.w.WriteString(snapshotMagic); err != nil {
			return err
		}
	}
	sw.scratch.Reset()
	if err := s.Write(context.Background(), sw.proto); err != nil {
		return fmt.Errorf("raftfsm: snapshot encode: %w", err)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(sw.scratch.Len()))
	if _, err := sw.w.Write(n[:]); err != nil {
		return err
	}
	_, err := sw.w.Write(sw.scratch.Bytes())
	return err
}

func (sw *snapshotWriter) flush() error { return sw.w.Flush() }

// Restore replaces the whole state with a snapshot's. On error the previous
// state is kept. Called by raft's FSM goroutine, never concurrently with Apply.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	t, m, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.store(&State{t: t, m: m})
	return nil
}

// snapshotReader reads length-prefixed frames.
type snapshotReader struct {
	r   *bufio.Reader
	buf []byte // reused: decoders copy what they keep
}

func (sr *snapshotReader) frame() ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(sr.r, n[:]); err != nil {
		return nil, fmt.Errorf("%w: truncated frame length: %v", ErrSnapshotFormat, err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxSnapshotFrame {
		return nil, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrSnapshotFormat, size, maxSnapshotFrame)
	}
	if int(size) > cap(sr.buf) {
		sr.buf = make([]byte, size)
	}
	b := sr.buf[:size]
	if _, err := io.ReadFull(sr.r, b); err != nil {
		return nil, fmt.Errorf("%w: truncated frame: %v", ErrSnapshotFormat, err)
	}
	return b, nil
}

// restoreBatch is how many decoded items travel to the inserter at once.
const restoreBatch = 512

// readSnapshot builds fresh tables, meta and books from a stream. Decoding
// runs on its own goroutine while this one collects the rows and books them,
// so a large restore uses two cores; the result does not depend on the
// timing. The tables are then built bottom-up from sorted rows (every node
// full), which is faster than inserting and leaves no slack.
func readSnapshot(r io.Reader) (tables, *meta, error) {
	sr := &snapshotReader{r: bufio.NewReaderSize(r, snapshotBuffer)}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(sr.r, magic); err != nil || !bytes.Equal(magic, []byte(snapshotMagic)) {
		return tables{}, nil, fmt.Errorf("%w: missing magic %q", ErrSnapshotFormat, snapshotMagic)
	}
	hb, err := sr.frame()
	if err != nil {
		return tables{}, nil, err
	}
	h := journal.NewTSnapshotHeader()
	if err := decodeCompact(hb, h); err != nil {
		return tables{}, nil, fmt.Errorf("%w: header: %v", ErrSnapshotFormat, err)
	}
	if h.FormatVersion != SnapshotFormatVersion {
		return tables{}, nil, fmt.Errorf("%w: format version %d; this master reads version %d only (upgrade it)",
			ErrSnapshotFormat, h.FormatVersion, SnapshotFormatVersion)
	}
	m := emptyMeta()
	m.lastJobID, m.lastCatalogID, m.lastBackendID = h.LastJobID, h.LastCatalogID, h.LastBackendID
	// Read-your-writes waits compare against the applied index, which must
	// not fall back to 0 after a restore.
	m.appliedIndex = uint64(max(h.GetAppliedIndex(), 0))
	for _, o := range h.Options {
		if o != nil {
			// Kept as stored, unknown keys included (a newer master's), so
			// the next snapshot carries them on unchanged.
			m.options[o.Key] = o.Value
			restoreOptionChange(m, o)
		}
	}
	m.resolved = options.Resolve(m.options)
	m.clusterID = h.GetClusterID()
	m.audit.lastSeq = h.GetLastAuditSeq()
	for _, a := range h.MemberAddresses {
		if a != nil && a.RPCAddress != "" {
			if m.members == nil {
				m.members = map[string]string{}
			}
			m.members[a.NodeID] = a.RPCAddress
		}
	}

	batches := make(chan []snapshotItem, 4)
	stop := make(chan struct{})
	decoded := make(chan error, 1)
	go func() { decoded <- sr.decodeItems(batches, stop) }()

	l := &loader{m: m, bk: m.books.txn(), names: map[string]bool{}, addrs: map[string]bool{}, in: jobcodec.NewInterner()}
	if n := h.GetJobCount(); n > 0 {
		l.jobs = make([]*row, 0, min(n, 1<<22)) // a hint: a corrupt header cannot make us allocate much
	}
	var loadErr error
	for batch := range batches {
		for _, it := range batch {
			if loadErr != nil {
				break
			}
			if loadErr = l.load(it); loadErr != nil {
				close(stop) // the decoder stops sending; keep draining until it closes
			}
		}
	}
	if err := cmp.Or(<-decoded, loadErr, l.finish(h)); err != nil {
		return tables{}, nil, err
	}
	return l.build(), m, nil
}

// decodeItems decodes frames up to the last item and sends them in batches.
// It closes out when done; it returns early once stop is closed.
func (sr *snapshotReader) decodeItems(out chan<- []snapshotItem, stop <-chan struct{}) error {
	defer close(out)
	in := jobcodec.NewInterner()
	batch := make([]snapshotItem, 0, restoreBatch)
	send := func() bool {
		select {
		case out <- batch:
			batch = make([]snapshotItem, 0, restoreBatch)
			return true
		case <-stop:
			return false
		}
	}
	for {
		b, err := sr.frame()
		if err != nil {
			return err
		}
		it, err := decodeSnapshotItem(b, in)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSnapshotFormat, err)
		}
		if it.last {
			if len(batch) > 0 {
				send()
			}
			return nil
		}
		batch = append(batch, it)
		if len(batch) == restoreBatch && !send() {
			return nil
		}
	}
}

// loader collects snapshot items for the tables and books them. Ids must
// ascend within each kind (the writer walks the id indexes), which also rules
// out duplicates without a lookup per job.
type loader struct {
	m                       *meta
	bk                      *bookTxn
	lastCat, lastBE, lastJB int64
	jobs                    []*row
	in                      *jobcodec.Interner // shares the packed rows' definitions
	scratch                 []byte
	catalogs                []*Catalog
	backends                []*Backend
	names, addrs            map[string]bool // folded, for the uniqueness checks
	audit                   []*AuditEvent
	lastAudit               int64
}

func (l *loader) load(it snapshotItem) error {
	switch {
	case it.catalog != nil:
		c := it.catalog
		if c.ID <= l.lastCat {
			return fmt.Errorf("%w: catalog id %d out of order", ErrSnapshotFormat, c.ID)
		}
		if l.names[fold(c.Name)] {
			return fmt.Errorf("%w: catalog name %q twice", ErrSnapshotFormat, c.Name)
		}
		l.names[fold(c.Name)] = true
		l.lastCat = c.ID
		l.m.catalogs++
		l.catalogs = append(l.catalogs, c)
		return nil
	case it.backend != nil:
		b := it.backend
		if b.ID <= l.lastBE {
			return fmt.Errorf("%w: backend id %d out of order", ErrSnapshotFormat, b.ID)
		}
		if l.addrs[fold(b.Address)] {
			return fmt.Errorf("%w: backend address %q twice", ErrSnapshotFormat, b.Address)
		}
		l.addrs[fold(b.Address)] = true
		l.lastBE = b.ID
		l.m.backends++
		l.backends = append(l.backends, b)
		return nil
	case it.job != nil:
		r := it.job
		if r.JobID <= l.lastJB {
			return fmt.Errorf("%w: job id %d out of order", ErrSnapshotFormat, r.JobID)
		}
		l.lastJB = r.JobID
		l.m.jobs++
		l.m.counts.move(nil, r)
		book(l.bk, nil, r)
		l.jobs = append(l.jobs, newRow(r, l.in, &l.scratch))
		return nil
	case it.audit != nil:
		return l.loadAuditEvent(it.audit)
	}
	// An item of a kind this master does not know (a newer writer): skip it.
	return nil
}

// finish checks the counts against the header (a truncated or spliced
// stream) and keeps id allocation above every restored id.
func (l *loader) finish(h *journal.TSnapshotHeader) error {
	for _, c := range []struct {
		what      string
		set       bool
		want, got int64
	}{
		{"jobs", h.IsSetJobCount(), h.GetJobCount(), l.m.jobs},
		{"catalogs", h.IsSetCatalogCount(), h.GetCatalogCount(), l.m.catalogs},
		{"backends", h.IsSetBackendCount(), h.GetBackendCount(), l.m.backends},
	} {
		if c.set && c.want != c.got {
			return fmt.Errorf("%w: header says %d %s, stream has %d", ErrSnapshotFormat, c.want, c.what, c.got)
		}
	}
	l.m.books = l.bk.commit()
	l.m.lastJobID = max(l.m.lastJobID, l.lastJB)
	l.m.lastCatalogID = max(l.m.lastCatalogID, l.lastCat)
	l.m.lastBackendID = max(l.m.lastBackendID, l.lastBE)
	l.m.audit.lastSeq = max(l.m.audit.lastSeq, l.lastAudit)
	return nil
}

// build makes the tables from the collected rows.
func (l *loader) build() tables {
	var t tables
	t.jobs = buildJobIndexes(l.jobs)
	t.catalogs, t.catalogNames = buildCatalogs(l.catalogs)
	t.backends, t.backendAddrs = buildBackends(l.backends)
	l.m.audit.events = ordtree.Build(l.audit)
	return t
}
