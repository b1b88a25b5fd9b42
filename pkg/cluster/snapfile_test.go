package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// journalBody is a journal snapshot stream holding n test commands.
func journalBody(t *testing.T, n int) []byte {
	t.Helper()
	fsm := raftfsm.New(nil)
	for i := 0; i < n; i++ {
		fsm.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: testCmd(i)})
	}
	var b bytes.Buffer
	if err := fsm.State().WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var testMeta = &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, ID: "2-17-1", Index: 17, Term: 2,
	Configuration: raft.Configuration{Servers: []raft.Server{
		{ID: "m1", Address: "127.0.0.1:7101", Suffrage: raft.Voter},
		{ID: "m2", Address: "127.0.0.1:7102", Suffrage: raft.Nonvoter},
	}}, ConfigurationIndex: 1}

func snapFile(t *testing.T, body []byte) []byte {
	t.Helper()
	var f bytes.Buffer
	if err := WriteSnapshotFile(&f, testMeta, "m1", 1_700_000_000_000, body); err != nil {
		t.Fatal(err)
	}
	return f.Bytes()
}

func TestSnapshotFileRoundTrip(t *testing.T) {
	body := journalBody(t, 7)
	file := snapFile(t, body)
	insp, err := InspectSnapshotFile(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	h := insp.Header
	if h.FormatVersion != 1 || h.NodeID != "m1" || h.Raft.Index != 17 || h.Raft.Term != 2 || h.BodySize != int64(len(body)) {
		t.Fatalf("header %+v", h)
	}
	if len(h.Raft.Configuration) != 2 || h.Raft.Configuration[1].Suffrage != "Nonvoter" {
		t.Fatalf("configuration %+v", h.Raft.Configuration)
	}
	m := h.snapshotMeta()
	if m.Index != 17 || m.Term != 2 || m.Size != int64(len(body)) || m.Configuration.Servers[1].Suffrage != raft.Nonvoter {
		t.Fatalf("meta %+v", m)
	}
	if insp.FileSize != int64(len(file)) || !bytes.Equal(file[insp.BodyOffset:], body) {
		t.Fatalf("file size %d / body offset %d", insp.FileSize, insp.BodyOffset)
	}
	j := insp.Journal
	if j.FormatVersion != raftfsm.SnapshotFormatVersion || j.Backends != 7 || j.LastBackendID != 7 || j.AppliedIndex != 7 {
		t.Fatalf("journal %+v", j)
	}
	if len(insp.State().Backends()) != 7 {
		t.Fatalf("decoded state has %d backends", len(insp.State().Backends()))
	}
}

func TestSnapshotFileRefusals(t *testing.T) {
	body := journalBody(t, 5)
	file := snapFile(t, body)
	_, bodyOff, err := ReadSnapshotFileHeader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(file)
		b[i] ^= 0x04
		return b
	}
	withHeader := func(edit func(*SnapshotFileHeader)) []byte {
		h, _, _ := ReadSnapshotFileHeader(bytes.NewReader(file))
		edit(h)
		prefix, err := encodeSnapshotFilePrefix(h)
		if err != nil {
			t.Fatal(err)
		}
		return append(prefix, body...)
	}
	cases := map[string]struct {
		file []byte
		want string
	}{
		"empty":              {nil, "shorter than its magic"},
		"not a snapshot":     {[]byte("hello, this is not a snapshot file at all"), "magic"},
		"flipped magic":      {flip(1), "magic"},
		"flipped header":     {flip(20), "header checksum mismatch"},
		"flipped header sum": {flip(int(bodyOff) - 3), "header checksum mismatch"},
		"flipped body":       {flip(int(bodyOff) + len(body)/2), "body checksum mismatch"},
		"flipped last byte":  {flip(len(file) - 1), "body checksum mismatch"},
		"truncated body":     {file[:len(file)-1], "truncated"},
		"truncated header":   {file[:30], "truncated header"},
		"trailing byte":      {append(bytes.Clone(file), 0), "after the"},
		"format version 2":   {withHeader(func(h *SnapshotFileHeader) { h.FormatVersion = 2 }), "unknown snapshot file format version 2"},
		"raft version 9":     {withHeader(func(h *SnapshotFileHeader) { h.Raft.SnapshotVersion = 9 }), "unsupported raft snapshot version"},
		"bad digest":         {withHeader(func(h *SnapshotFileHeader) { h.BodySHA256 = "zz" }), "not a hex SHA-256"},
		"huge length": {func() []byte {
			b := bytes.Clone(file)
			binary.BigEndian.PutUint32(b[8:], 1<<30)
			return b
		}(), "header length"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := InspectSnapshotFile(bytes.NewReader(tc.file))
			if !errors.Is(err, ErrSnapshotFile) || !errors.Is(err, raftfsm.ErrSnapshotFormat) {
				t.Fatalf("err = %v, want a SnapshotFileError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// A body whose journal header names an unknown format version is refused,
// although its checksums are right.
func TestSnapshotFileRefusesAnUnknownJournalFormat(t *testing.T) {
	body := futureJournalBody(t)
	_, err := InspectSnapshotFile(bytes.NewReader(snapFile(t, body)))
	if !errors.Is(err, ErrSnapshotFile) || !strings.Contains(err.Error(), "unknown journal snapshot format version 99") {
		t.Fatalf("err = %v", err)
	}
	// A body that is not a journal snapshot at all.
	_, err = InspectSnapshotFile(bytes.NewReader(snapFile(t, []byte("LMSNAQ and then some"))))
	if !errors.Is(err, ErrSnapshotFile) || !strings.Contains(err.Error(), "not a journal snapshot") {
		t.Fatalf("err = %v", err)
	}
	// A journal whose items do not decode (right checksum, wrong content).
	good := journalBody(t, 3)
	good = good[:len(good)-3]
	_, err = InspectSnapshotFile(bytes.NewReader(snapFile(t, good)))
	if !errors.Is(err, ErrSnapshotFile) || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("err = %v", err)
	}
}

// futureJournalBody is a journal snapshot of format version 99.
func futureJournalBody(t *testing.T) []byte {
	t.Helper()
	frame := func(s thrift.TStruct) []byte {
		mem := thrift.NewTMemoryBuffer()
		if err := s.Write(context.Background(), thrift.NewTCompactProtocolConf(mem, &thrift.TConfiguration{})); err != nil {
			t.Fatal(err)
		}
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(mem.Len()))
		return append(n[:], mem.Bytes()...)
	}
	b := []byte("LMSNAP")
	b = append(b, frame(&journal.TSnapshotHeader{FormatVersion: 99})...)
	return append(b, frame(&journal.TSnapshotItem{Last: thrift.BoolPtr(true)})...)
}

func TestVerifyingReader(t *testing.T) {
	body := []byte(strings.Repeat("lancemaster ", 1000))
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])
	if got, err := io.ReadAll(newVerifyingReader(bytes.NewReader(body), int64(len(body)), want)); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("good body: %v", err)
	}
	changed := bytes.Clone(body)
	changed[500] = 'X'
	if _, err := io.ReadAll(newVerifyingReader(bytes.NewReader(changed), int64(len(body)), want)); !errors.Is(err, ErrSnapshotFile) {
		t.Fatalf("changed body: err = %v", err)
	}
	if _, err := io.ReadAll(newVerifyingReader(bytes.NewReader(body[:10]), int64(len(body)), want)); !errors.Is(err, ErrSnapshotFile) {
		t.Fatalf("short body: err = %v", err)
	}
}
