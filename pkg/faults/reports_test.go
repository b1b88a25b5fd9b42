package faults

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// takenReport reads a report call the master proxy relayed and the answer
// the backend received: the invocation id, and whether the answer was OK
// (the backend then removes the report from its outbox). ok is false for
// anything else: another method, an exception, a non-OK status, or bytes
// that do not decode.
func takenReport(frame, reply []byte) (invocationID string, ok bool) {
	method := methodName(frame)
	if !isReport(method) || len(frame) < 4 || len(reply) < 4 {
		return "", false
	}
	ctx := context.Background()
	in := thrift.NewTBinaryProtocolConf(thrift.NewStreamTransportR(bytes.NewReader(frame[4:])), nil)
	if _, _, _, err := in.ReadMessageBegin(ctx); err != nil {
		return "", false
	}
	out := thrift.NewTBinaryProtocolConf(thrift.NewStreamTransportR(bytes.NewReader(reply[4:])), nil)
	_, typ, _, err := out.ReadMessageBegin(ctx)
	if err != nil || typ != thrift.REPLY {
		return "", false
	}
	var status *wire.TStatus
	switch method {
	case "reportLanceIndexJobResult":
		args, res := adminapi.NewLanceMasterServiceReportLanceIndexJobResultArgs(), adminapi.NewLanceMasterServiceReportLanceIndexJobResultResult()
		if args.Read(ctx, in) != nil || res.Read(ctx, out) != nil || args.Report == nil {
			return "", false
		}
		invocationID, status = args.Report.InvocationID, res.Success
	default: // reportLanceIndexJobTermination
		args, res := adminapi.NewLanceMasterServiceReportLanceIndexJobTerminationArgs(), adminapi.NewLanceMasterServiceReportLanceIndexJobTerminationResult()
		if args.Read(ctx, in) != nil || res.Read(ctx, out) != nil || args.Report == nil {
			return "", false
		}
		invocationID, status = args.Report.InvocationID, res.Success
	}
	return invocationID, status != nil && status.StatusCode == wire.TStatusCode_OK
}

// frameOf encodes one framed TBinaryProtocol message, as the proxy sees it.
func frameOf(t *testing.T, name string, typ thrift.TMessageType, body thrift.TStruct) []byte {
	return rpctest.Frame(rpctest.Message(t, name, typ, 1, body))
}

func TestTakenReportReadsTheInvocationAndTheAnswer(t *testing.T) {
	args := adminapi.NewLanceMasterServiceReportLanceIndexJobResultArgs()
	args.Report = &wire.TLanceIndexJobReport{JobID: 2, InvocationID: "inv-2"}
	req := frameOf(t, "reportLanceIndexJobResult", thrift.CALL, args)
	answer := func(code wire.TStatusCode) []byte {
		res := adminapi.NewLanceMasterServiceReportLanceIndexJobResultResult()
		res.Success = &wire.TStatus{StatusCode: code}
		return frameOf(t, "reportLanceIndexJobResult", thrift.REPLY, res)
	}
	if id, ok := takenReport(req, answer(wire.TStatusCode_OK)); !ok || id != "inv-2" {
		t.Fatalf("an OK answer: got %q, %v", id, ok)
	}
	if _, ok := takenReport(req, answer(wire.TStatusCode_STALE_REPORT)); ok {
		t.Fatal("a refusal is not a taken report")
	}
	targs := adminapi.NewLanceMasterServiceReportLanceIndexJobTerminationArgs()
	targs.Report = &wire.TLanceIndexJobTerminationReport{JobID: 3, InvocationID: "inv-3"}
	tres := adminapi.NewLanceMasterServiceReportLanceIndexJobTerminationResult()
	tres.Success = &wire.TStatus{StatusCode: wire.TStatusCode_OK}
	if id, ok := takenReport(frameOf(t, "reportLanceIndexJobTermination", thrift.CALL, targs),
		frameOf(t, "reportLanceIndexJobTermination", thrift.REPLY, tres)); !ok || id != "inv-3" {
		t.Fatalf("a termination report's OK answer: got %q, %v", id, ok)
	}
	if _, ok := takenReport(req[:10], answer(wire.TStatusCode_OK)); ok {
		t.Fatal("a truncated call decodes to nothing")
	}
}
