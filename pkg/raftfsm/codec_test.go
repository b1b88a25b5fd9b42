package raftfsm

import (
	"reflect"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
)

func TestCatalogAndBackendRoundTrip(t *testing.T) {
	c := &Catalog{ID: 1, Name: "n", Provider: "DIRECTORY", RootURI: "/r", CredentialsRef: "k", RefreshKind: "webhook",
		RefreshURL: "http://x", CreateTimeMs: 2, UpdateTimeMs: 3, RefreshAddress: "fe:9030", RefreshStatement: "REFRESH TABLE {table}",
		RefreshCredentialsRef: "doris", OptimizeUnindexedRows: 5000, OptimizeMinIntervalSecond: 60}
	if got := CatalogFromThrift(CatalogToThrift(c)); *got != *c {
		t.Fatalf("catalog %+v", got)
	}
	b := &Backend{ID: 1, Address: "h:1", AddTimeMs: 2}
	if got := BackendFromThrift(BackendToThrift(b)); *got != *b {
		t.Fatalf("backend %+v", got)
	}
}

func TestEncodeLayout(t *testing.T) {
	data, err := Encode(CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: "k", Value: "v"})
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != byte(CmdSetOption) {
		t.Fatalf("type byte = %d", data[0])
	}
	cmd := journal.NewTSetOptionCommand()
	if err := decodeCompact(data[1:], cmd); err != nil || cmd.Key != "k" || cmd.Value != "v" || cmd.NowMs != 1 {
		t.Fatalf("decoded %+v, %v", cmd, err)
	}
	// A required struct left nil is an error, not a panic.
	if _, err := Encode(CmdAdmit, &journal.TAdmitCommand{NowMs: 1}); err == nil {
		t.Fatalf("encoding an admit without a job succeeded")
	}
	// Thrift would write a nil list element as an empty struct that no
	// replica can decode: a poison entry. Encode refuses it.
	if _, err := Encode(CmdMarkRunningBatch, &journal.TMarkRunningBatch{Jobs: []*journal.TMarkRunning{nil}}); err == nil {
		t.Fatalf("encoding a batch with a nil item succeeded")
	}
	if _, err := Encode(CmdCancel, nil); err == nil {
		t.Fatalf("encoding nil succeeded")
	}
	// An admission batch is checked with the decoder Apply reads it with
	// (the direct one): it refuses the same poison.
	if _, err := Encode(CmdAdmitBatch, &journal.TAdmitBatch{NowMs: 1, Jobs: []*journal.TJobRecord{nil}}); err == nil {
		t.Fatalf("encoding an admission batch with a nil job succeeded")
	}
	// A type no register call knows is checked with the generated reader.
	const unregistered = CommandType(0x7e)
	if _, ok := decoders[unregistered]; ok {
		t.Fatalf("type %d is registered", unregistered)
	}
	if _, err := Encode(unregistered, &journal.TMarkRunningBatch{Jobs: []*journal.TMarkRunning{nil}}); err == nil {
		t.Fatalf("encoding an unregistered type's poison succeeded")
	}
	if _, err := Encode(unregistered, &journal.TSetOptionCommand{NowMs: 1, Key: "k", Value: "v"}); err != nil {
		t.Fatalf("encoding an unregistered type: %v", err)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	r := &journal.TApplyResponse{Code: journal.TApplyCode_FENCE_CONFLICT, Message: thrift.StringPtr("m"),
		ID: thrift.Int64Ptr(3), ConflictJobID: thrift.Int64Ptr(2),
		Items: []*journal.TItemResult_{{JobID: 1, Code: journal.TApplyCode_NOOP, Message: thrift.StringPtr("x")}}}
	b, err := EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeResponse(b)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := DecodeResponse([]byte{0xff}); err == nil {
		t.Fatalf("garbage decoded")
	}
	if _, err := EncodeResponse(nil); err == nil {
		t.Fatalf("nil encoded")
	}
}
