package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"sort"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// A snapshot file is what `operator snapshot save` writes and `restore`
// uploads (docs/operations.md):
//
//	offset 0     magic "LMOPSNAP" (8 bytes)
//	8            N, the header's length: uint32 big-endian, 2 .. 64 KiB
//	12           the header: N bytes of JSON (SnapshotFileHeader)
//	12+N         SHA-256 of those N header bytes (32 bytes)
//	44+N         the body: header.body_size bytes, raft's snapshot of the
//	             journal FSM exactly as raft stores it (raftfsm's stream:
//	             "LMSNAP", the journal's TSnapshotHeader, the items)
//	44+N+size    end of file: nothing may follow the body
//
// header.body_sha256 is the SHA-256 of the body, so a flipped byte anywhere
// is caught: in the header by its own digest, in the body by body_sha256.
// The header is JSON so that `head -c 2000 FILE` shows what a file is.
// format_version changes only with an incompatible layout; readers refuse a
// version they do not know, and ignore JSON fields they do not know.
const (
	snapshotFileMagic = "LMOPSNAP"
	// SnapshotFileFormatVersion is the layout above.
	SnapshotFileFormatVersion = 1
	maxSnapshotFileHeader     = 64 << 10
	// MaxSnapshotFileSize bounds a file a master accepts for restore: the
	// whole state is decoded in memory (twice: once to verify it).
	MaxSnapshotFileSize = 16 << 30
	// fsmFrameLimit bounds the journal snapshot's header frame read by
	// inspection (raftfsm bounds its frames to 16 MiB as well).
	fsmFrameLimit = 16 << 20
)

// ErrSnapshotFile is matched (errors.Is) by every *SnapshotFileError.
var ErrSnapshotFile = errors.New("invalid snapshot file")

// SnapshotFileError says why a file is not a snapshot file this master can
// restore: a bad checksum, a truncated or padded file, an unknown format
// version, an undecodable journal. Nothing was changed when it is returned.
// It also matches raftfsm.ErrSnapshotFormat.
type SnapshotFileError struct{ Reason string }

func (e *SnapshotFileError) Error() string { return "snapshot file refused: " + e.Reason }

// Is makes errors.Is match ErrSnapshotFile and raftfsm.ErrSnapshotFormat.
func (e *SnapshotFileError) Is(target error) bool {
	return target == ErrSnapshotFile || target == raftfsm.ErrSnapshotFormat
}

func badFile(format string, args ...any) error {
	return &SnapshotFileError{Reason: fmt.Sprintf(format, args...)}
}

// SnapshotFileHeader is the JSON header of a snapshot file.
type SnapshotFileHeader struct {
	FormatVersion int    `json:"format_version"`
	CreatedUnixMs int64  `json:"created_unix_ms"`
	NodeID        string `json:"node_id"` // the master (leader) that took it
	// Raft is the snapshot's raft metadata (raft.SnapshotMeta): what
	// raft.Restore needs, and what the journal was at.
	Raft       SnapshotRaftMeta `json:"raft"`
	BodySize   int64            `json:"body_size"`
	BodySHA256 string           `json:"body_sha256"` // lower-case hex
}

// SnapshotRaftMeta is raft's metadata of the snapshot in a file.
type SnapshotRaftMeta struct {
	SnapshotVersion    int              `json:"snapshot_version"`
	ID                 string           `json:"id"`
	Index              uint64           `json:"index"`
	Term               uint64           `json:"term"`
	Configuration      []SnapshotServer `json:"configuration"`
	ConfigurationIndex uint64           `json:"configuration_index"`
}

// SnapshotServer is one member of the raft configuration a snapshot was
// taken under (informational: a restore keeps the cluster's own membership).
type SnapshotServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

func raftMetaOf(m *raft.SnapshotMeta) SnapshotRaftMeta {
	out := SnapshotRaftMeta{SnapshotVersion: int(m.Version), ID: m.ID, Index: m.Index, Term: m.Term,
		ConfigurationIndex: m.ConfigurationIndex, Configuration: []SnapshotServer{}}
	for _, s := range m.Configuration.Servers {
		out.Configuration = append(out.Configuration,
			SnapshotServer{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	return out
}

// snapshotMeta is what raft.Restore is given. The configuration is
// informational there too: raft keeps its latest one.
func (h *SnapshotFileHeader) snapshotMeta() *raft.SnapshotMeta {
	m := &raft.SnapshotMeta{Version: raft.SnapshotVersion(h.Raft.SnapshotVersion), ID: h.Raft.ID,
		Index: h.Raft.Index, Term: h.Raft.Term, ConfigurationIndex: h.Raft.ConfigurationIndex, Size: h.BodySize}
	for _, s := range h.Raft.Configuration {
		suffrage := raft.Voter
		if s.Suffrage == raft.Nonvoter.String() {
			suffrage = raft.Nonvoter
		}
		m.Configuration.Servers = append(m.Configuration.Servers,
			raft.Server{ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Address), Suffrage: suffrage})
	}
	return m
}

// encodeSnapshotFilePrefix returns everything before the body: magic,
// length, header, header digest.
func encodeSnapshotFilePrefix(h *SnapshotFileHeader) ([]byte, error) {
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode snapshot file header: %w", err)
	}
	if len(js) > maxSnapshotFileHeader {
		return nil, fmt.Errorf("cluster: snapshot file header of %d bytes exceeds %d", len(js), maxSnapshotFileHeader)
	}
	var b bytes.Buffer
	b.WriteString(snapshotFileMagic)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(js)))
	b.Write(js)
	sum := sha256.Sum256(js)
	b.Write(sum[:])
	return b.Bytes(), nil
}

// WriteSnapshotFile writes a whole snapshot file: body is a journal
// snapshot stream (raftfsm's State.WriteSnapshot) taken at meta's index and
// term. Masters write files through SaveSnapshot; this is for tools and
// tests.
func WriteSnapshotFile(w io.Writer, meta *raft.SnapshotMeta, nodeID string, createdUnixMs int64, body []byte) error {
	sum := sha256.Sum256(body)
	m := *meta
	m.Size = int64(len(body))
	prefix, err := encodeSnapshotFilePrefix(&SnapshotFileHeader{FormatVersion: SnapshotFileFormatVersion,
		CreatedUnixMs: createdUnixMs, NodeID: nodeID, Raft: raftMetaOf(&m),
		BodySize: int64(len(body)), BodySHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		return err
	}
	if _, err := w.Write(prefix); err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

// ReadSnapshotFileHeader reads and checks everything before the body: the
// magic, the header's digest, its JSON, the format version and the raft
// snapshot version. It returns the header and the body's offset.
func ReadSnapshotFileHeader(r io.Reader) (*SnapshotFileHeader, int64, error) {
	var fixed [len(snapshotFileMagic) + 4]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return nil, 0, badFile("not a lancemaster snapshot file (shorter than its magic): %v", err)
	}
	if string(fixed[:len(snapshotFileMagic)]) != snapshotFileMagic {
		return nil, 0, badFile("not a lancemaster snapshot file (no %q magic)", snapshotFileMagic)
	}
	n := binary.BigEndian.Uint32(fixed[len(snapshotFileMagic):])
	if n < 2 || n > maxSnapshotFileHeader {
		return nil, 0, badFile("header length %d is outside 2..%d", n, maxSnapshotFileHeader)
	}
	buf := make([]byte, int(n)+sha256.Size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, 0, badFile("truncated header: %v", err)
	}
	js, digest := buf[:n], buf[n:]
	if sum := sha256.Sum256(js); !bytes.Equal(sum[:], digest) {
		return nil, 0, badFile("header checksum mismatch: the file is corrupted")
	}
	h := &SnapshotFileHeader{}
	if err := json.Unmarshal(js, h); err != nil {
		return nil, 0, badFile("undecodable header: %v", err)
	}
	if h.FormatVersion != SnapshotFileFormatVersion {
		return nil, 0, badFile("unknown snapshot file format version %d; this lancemaster reads version %d (use a matching release)",
			h.FormatVersion, SnapshotFileFormatVersion)
	}
	if v := raft.SnapshotVersion(h.Raft.SnapshotVersion); v < raft.SnapshotVersionMin || v > raft.SnapshotVersionMax {
		return nil, 0, badFile("unsupported raft snapshot version %d (supported %d..%d)",
			h.Raft.SnapshotVersion, raft.SnapshotVersionMin, raft.SnapshotVersionMax)
	}
	if h.BodySize <= 0 || h.BodySize > MaxSnapshotFileSize {
		return nil, 0, badFile("body size %d is outside 1..%d", h.BodySize, int64(MaxSnapshotFileSize))
	}
	if d, err := hex.DecodeString(h.BodySHA256); err != nil || len(d) != sha256.Size {
		return nil, 0, badFile("body_sha256 %q is not a hex SHA-256", clipString(h.BodySHA256, 80))
	}
	return h, int64(len(fixed)) + int64(len(buf)), nil
}

// SnapshotInspection is what a verified snapshot file holds.
type SnapshotInspection struct {
	Header *SnapshotFileHeader `json:"file"`
	// FileSize is the whole file's size in bytes.
	FileSize int64 `json:"file_size"`
	// BodyOffset is where the body starts.
	BodyOffset int64 `json:"-"`
	// Journal describes the journal state in the body.
	Journal SnapshotJournal `json:"journal"`

	state *raftfsm.State
}

// SnapshotJournal summarises the journal state of a snapshot.
type SnapshotJournal struct {
	FormatVersion int32             `json:"format_version"` // raftfsm.SnapshotFormatVersion of the body
	AppliedIndex  int64             `json:"applied_index"`
	Jobs          int64             `json:"jobs"`
	Catalogs      int64             `json:"catalogs"`
	Backends      int64             `json:"backends"`
	LastJobID     int64             `json:"last_job_id"`
	LastCatalogID int64             `json:"last_catalog_id"`
	LastBackendID int64             `json:"last_backend_id"`
	Options       map[string]string `json:"options"`        // explicitly set options only
	JobStates     map[string]int64  `json:"job_states"`     // by mutation state
	RefreshStates map[string]int64  `json:"refresh_states"` // by refresh state
}

// State is the decoded journal state (immutable; for tools and tests).
func (s *SnapshotInspection) State() *raftfsm.State { return s.state }

// InspectSnapshotFile verifies a whole snapshot file and describes it. It
// reads f three times: the header and the body's checksum (refusing a file
// that is truncated or has bytes after the body), the journal's header, and
// a full decode of the journal into a scratch FSM (what every replica's
// Restore will do), which refuses an unknown journal format. Any refusal is
// a *SnapshotFileError; other errors are I/O errors.
func InspectSnapshotFile(f io.ReadSeeker) (*SnapshotInspection, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	h, bodyOff, err := ReadSnapshotFileHeader(f)
	if err != nil {
		return nil, err
	}
	hash := sha256.New()
	n, err := io.CopyN(hash, f, h.BodySize)
	if errors.Is(err, io.EOF) {
		return nil, badFile("truncated: the body has %d of %d bytes", n, h.BodySize)
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot body: %w", err)
	}
	var one [1]byte
	if k, _ := io.ReadFull(f, one[:]); k != 0 {
		return nil, badFile("unexpected bytes after the %d-byte body", h.BodySize)
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != h.BodySHA256 {
		return nil, badFile("body checksum mismatch (sha256 %s, header says %s): the file is corrupted", got, h.BodySHA256)
	}

	if _, err := f.Seek(bodyOff, io.SeekStart); err != nil {
		return nil, err
	}
	jh, err := readJournalHeader(io.LimitReader(f, h.BodySize))
	if err != nil {
		return nil, err
	}
	if jh.FormatVersion != raftfsm.SnapshotFormatVersion {
		return nil, badFile("unknown journal snapshot format version %d; this lancemaster reads version %d (use a matching release)",
			jh.FormatVersion, raftfsm.SnapshotFormatVersion)
	}

	if _, err := f.Seek(bodyOff, io.SeekStart); err != nil {
		return nil, err
	}
	scratch := raftfsm.New(nil)
	if err := scratch.Restore(io.NopCloser(io.LimitReader(f, h.BodySize))); err != nil {
		return nil, badFile("the journal does not decode: %v", err)
	}
	st := scratch.State()
	out := &SnapshotInspection{Header: h, FileSize: bodyOff + h.BodySize, BodyOffset: bodyOff, state: st}
	j := &out.Journal
	j.FormatVersion = jh.FormatVersion
	j.AppliedIndex = jh.GetAppliedIndex()
	j.Jobs, j.Catalogs, j.Backends = jh.GetJobCount(), jh.GetCatalogCount(), jh.GetBackendCount()
	j.LastJobID, j.LastCatalogID, j.LastBackendID = jh.LastJobID, jh.LastCatalogID, jh.LastBackendID
	j.Options = st.OptionValues()
	j.JobStates, j.RefreshStates = map[string]int64{}, map[string]int64{}
	for after := int64(0); ; {
		recs, more := st.ListJobs(raftfsm.JobFilter{}, after, 4096)
		for _, r := range recs {
			j.JobStates[r.MutationState.String()]++
			j.RefreshStates[r.RefreshState.String()]++
		}
		if !more || len(recs) == 0 {
			break
		}
		after = recs[len(recs)-1].JobID
	}
	return out, nil
}

// readJournalHeader decodes the journal snapshot's header frame: the magic
// "LMSNAP", a big-endian uint32 length and a compact TSnapshotHeader
// (pkg/raftfsm/snapshot.go). Only the header is read.
func readJournalHeader(r io.Reader) (*journal.TSnapshotHeader, error) {
	const magic = "LMSNAP"
	var fixed [len(magic) + 4]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil || string(fixed[:len(magic)]) != magic {
		return nil, badFile("the body is not a journal snapshot (no %q magic)", magic)
	}
	n := binary.BigEndian.Uint32(fixed[len(magic):])
	if n > fsmFrameLimit {
		return nil, badFile("journal header frame of %d bytes exceeds %d", n, fsmFrameLimit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, badFile("truncated journal header: %v", err)
	}
	mem := thrift.NewTMemoryBufferLen(len(b))
	_, _ = mem.Write(b)
	proto := thrift.NewTCompactProtocolConf(mem, &thrift.TConfiguration{
		MaxMessageSize: math.MaxInt32, MaxFrameSize: math.MaxInt32})
	h := journal.NewTSnapshotHeader()
	if err := h.Read(context.Background(), proto); err != nil {
		return nil, badFile("undecodable journal header: %v", err)
	}
	return h, nil
}

// SortedKeys returns m's keys in order (for printing inspections).
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// verifyingReader passes size bytes through and, at their end, fails
// instead of returning io.EOF when their SHA-256 is not want: raft's copy of
// a file that changed after it was verified then fails before the restore
// reaches the FSM (raft cancels the copy; nothing changes).
type verifyingReader struct {
	r    io.Reader
	left int64
	h    hash.Hash
	want string
}

func newVerifyingReader(r io.Reader, size int64, want string) *verifyingReader {
	return &verifyingReader{r: io.LimitReader(r, size), left: size, h: sha256.New(), want: want}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.left -= int64(n)
	_, _ = v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if v.left != 0 {
			return n, badFile("the body shrank while it was being restored")
		}
		if hex.EncodeToString(v.h.Sum(nil)) != v.want {
			return n, badFile("the body changed after it was verified")
		}
	}
	return n, err
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
