package raftfsm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// The journal's wire form: one type byte, then the Thrift compact encoding of
// the command (idl/journal.thrift). Compact field ids let a newer master add
// fields that an older one skips, which is what makes rolling upgrades safe.

// thriftConf bounds what a decoder accepts; journal entries and snapshot
// items are small, so the library defaults (100 MB messages) are plenty.
var thriftConf = &thrift.TConfiguration{}

// ErrEmptyEntry: a log entry without even a type byte.
var ErrEmptyEntry = errors.New("raftfsm: empty log entry")

// Encode builds a log entry: the type byte followed by the compact encoding
// of cmd. cmd must be a pointer to a generated struct. A command missing a
// required field is an error here rather than a fatal entry on every replica.
func Encode(t CommandType, cmd thrift.TStruct) (out []byte, err error) {
	buf := thrift.NewTMemoryBufferLen(256)
	if err := buf.WriteByte(byte(t)); err != nil {
		return nil, err
	}
	if err := writeCompact(buf, cmd); err != nil {
		return nil, fmt.Errorf("raftfsm: encode command type %d: %w", t, err)
	}
	out = buf.Bytes()
	// Thrift writes a nil required struct (or a nil list element) as an
	// empty struct that no replica can decode, and an undecodable committed
	// entry stops every master (OnFatal). Refuse it here, before proposing:
	// with the decoder Apply reads the type with (which accepts and refuses
	// what the generated reader does; an admission batch's is the direct
	// one), else with the generated reader.
	check := decoders[t]
	if check == nil {
		check = func(body []byte) error {
			return decodeCompact(body, reflect.New(reflect.TypeOf(cmd).Elem()).Interface().(thrift.TStruct))
		}
	}
	if err := check(out[1:]); err != nil {
		return nil, fmt.Errorf("raftfsm: command type %d would not decode (a required field is missing): %w", t, err)
	}
	return out, nil
}

// EncodeResponse encodes an Apply response for forwarding between masters.
func EncodeResponse(r *journal.TApplyResponse) ([]byte, error) {
	if r == nil {
		return nil, errors.New("raftfsm: encode nil apply response")
	}
	buf := thrift.NewTMemoryBufferLen(64)
	if err := writeCompact(buf, r); err != nil {
		return nil, fmt.Errorf("raftfsm: encode apply response: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeResponse decodes what EncodeResponse produced.
func DecodeResponse(b []byte) (*journal.TApplyResponse, error) {
	r := journal.NewTApplyResponse()
	if err := decodeCompact(b, r); err != nil {
		return nil, fmt.Errorf("raftfsm: decode apply response: %w", err)
	}
	return r, nil
}

// writeCompact appends the compact encoding of s to buf. Generated Write
// dereferences required struct fields, so a nil one would panic; turn that
// into an error because Encode runs on request paths.
func writeCompact(buf *thrift.TMemoryBuffer, s thrift.TStruct) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("incomplete struct (a required field is nil): %v", r)
		}
	}()
	p := thrift.NewTCompactProtocolConf(buf, thriftConf)
	if err := s.Write(context.Background(), p); err != nil {
		return err
	}
	return p.Flush(context.Background())
}

// decodeCompact reads one compact-encoded struct from b. b is read in place,
// never written: every Apply on every replica decodes its entry, and a copy
// of each showed in the admission benchmark's allocation profile.
func decodeCompact(b []byte, s thrift.TStruct) error {
	buf := &thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(b)}
	p := thrift.NewTCompactProtocolConf(buf, thriftConf)
	return s.Read(context.Background(), p)
}

// ---- job records ------------------------------------------------------------

// RecordToThrift converts a record to its journal form (jobcodec), for the
// packages that build commands. The result does not alias r.
func RecordToThrift(r *job.Record) *journal.TJobRecord { return jobcodec.RecordToThrift(r) }

// ResourcesToThrift is r's journal form (jobcodec), for the packages that
// build reports. It does not alias r.
func ResourcesToThrift(r *job.Resources) *journal.TResources { return jobcodec.ResourcesToThrift(r) }

// ---- catalogs and backends --------------------------------------------------

// CatalogToThrift converts a catalog to its journal form.
func CatalogToThrift(c *Catalog) *journal.TCatalogRecord {
	cp := *c
	return &journal.TCatalogRecord{
		CatalogID:      cp.ID,
		Name:           cp.Name,
		Provider:       jobcodec.OptString(&cp.Provider),
		RootURI:        jobcodec.OptString(&cp.RootURI),
		CredentialsRef: jobcodec.OptString(&cp.CredentialsRef),
		RefreshKind:    jobcodec.OptString(&cp.RefreshKind),
		RefreshURL:     jobcodec.OptString(&cp.RefreshURL),
		CreateTimeMs:   jobcodec.OptInt64(&cp.CreateTimeMs),
		UpdateTimeMs:   jobcodec.OptInt64(&cp.UpdateTimeMs),

		RefreshAddress:            jobcodec.OptString(&cp.RefreshAddress),
		RefreshStatement:          jobcodec.OptString(&cp.RefreshStatement),
		RefreshCredentialsRef:     jobcodec.OptString(&cp.RefreshCredentialsRef),
		OptimizeUnindexedRows:     jobcodec.OptInt64(&cp.OptimizeUnindexedRows),
		OptimizeMinIntervalSecond: jobcodec.OptInt64(&cp.OptimizeMinIntervalSecond),
	}
}

// CatalogFromThrift converts a journal catalog record.
func CatalogFromThrift(t *journal.TCatalogRecord) *Catalog {
	return &Catalog{
		ID:             t.CatalogID,
		Name:           t.Name,
		Provider:       t.GetProvider(),
		RootURI:        t.GetRootURI(),
		CredentialsRef: t.GetCredentialsRef(),
		RefreshKind:    t.GetRefreshKind(),
		RefreshURL:     t.GetRefreshURL(),
		CreateTimeMs:   t.GetCreateTimeMs(),
		UpdateTimeMs:   t.GetUpdateTimeMs(),

		RefreshAddress:            t.GetRefreshAddress(),
		RefreshStatement:          t.GetRefreshStatement(),
		RefreshCredentialsRef:     t.GetRefreshCredentialsRef(),
		OptimizeUnindexedRows:     t.GetOptimizeUnindexedRows(),
		OptimizeMinIntervalSecond: t.GetOptimizeMinIntervalSecond(),
	}
}

// BackendToThrift converts a backend to its journal form.
func BackendToThrift(b *Backend) *journal.TBackendRecord {
	cp := *b
	return &journal.TBackendRecord{BackendID: cp.ID, Address: cp.Address, AddTimeMs: jobcodec.OptInt64(&cp.AddTimeMs),
		Drained: jobcodec.OptBool(&cp.Drained), DrainTimeMs: jobcodec.OptInt64(&cp.DrainTimeMs), DrainActor: jobcodec.OptString(&cp.DrainActor)}
}

// BackendFromThrift converts a journal backend record.
func BackendFromThrift(t *journal.TBackendRecord) *Backend {
	return &Backend{ID: t.BackendID, Address: t.Address, AddTimeMs: t.GetAddTimeMs(),
		Drained: t.GetDrained(), DrainTimeMs: t.GetDrainTimeMs(), DrainActor: t.GetDrainActor()}
}
