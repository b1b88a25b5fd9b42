package admin

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
	"github.com/lancemaster/lancemaster/pkg/report"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// FuzzAdminRequest feeds one framed Thrift message to the admin processor
// exactly as the master's server stack reads it (framed transport, strict
// binary protocol, the rpc limits), against a real admin Server over a real
// FSM with a catalog, a backend and a pending job. For every input:
//
//   - no panic (the processor is not wrapped in the recover middleware here:
//     a panic is a bug even though the server would survive it);
//   - the reply is well formed: nothing only when Process failed (the server
//     then closes the connection), otherwise exactly one framed message, a
//     REPLY or EXCEPTION for the method called with its sequence id, whose
//     body decodes completely: a TApplicationException for a request that
//     never reached a handler (never INTERNAL_ERROR, which would mean a
//     handler returned an error other than TAdminError, its text sent to
//     the client), or a result with at most one field set (success, or a
//     TAdminError carrying a known code);
//   - a request refused before it reached a handler (an exception reply or a
//     failed Process), or refused as INVALID, journals nothing; a request
//     answered with any other TAdminError leaves the state unchanged;
//   - the catalog's storage credentials never appear in a reply;
//   - no entry that reaches the FSM is fatal.
//
// Input: the message body; the harness adds the frame header. The seed
// corpus (testdata/fuzz/FuzzAdminRequest) holds a valid call of every
// method and a few malformed ones; regenerate it with
// LANCEMASTER_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzAdminRequestSeeds.
func FuzzAdminRequest(f *testing.F) {
	tconf := rpc.DefaultConfig().TConfiguration()
	f.Fuzz(func(t *testing.T, body []byte) {
		fx := newFuzzAdmin(t)
		before, entries := fx.view(), fx.prop.Index()

		in := thrift.NewTMemoryBufferLen(len(body) + 4)
		in.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
		in.Write(body)
		out := thrift.NewTMemoryBuffer()
		iprot := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(in, tconf), tconf)
		oprot := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(out, tconf), tconf)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, perr := fx.srv.Processor().Process(ctx, iprot, oprot)

		if err := fx.fatal(); err != nil {
			t.Fatalf("an entry reached the FSM that no replica can apply: %v", err)
		}
		reply := out.Bytes()
		if bytes.Contains(reply, []byte(canarySecret)) {
			t.Fatal("a reply carries the catalog's storage credentials")
		}
		name, seq, callOK := fuzzCallHeader(body, tconf)
		outcome := fuzzCheckReply(t, reply, perr, name, seq, callOK, tconf)

		changed := !reflect.DeepEqual(before, fx.view())
		switch {
		case outcome.refused || outcome.code == adminapi.TErrorCode_INVALID:
			if fx.prop.Index() != entries || changed {
				t.Fatalf("%s refused (%s) but journaled %d entries (state changed: %v)",
					name, outcome, fx.prop.Index()-entries, changed)
			}
		case outcome.adminErr && changed:
			t.Fatalf("%s answered %s but changed the state", name, outcome)
		}
	})
}

// replyOutcome is what a reply said.
type replyOutcome struct {
	refused  bool // no reply, or a TApplicationException
	adminErr bool
	code     adminapi.TErrorCode
}

func (o replyOutcome) String() string {
	switch {
	case o.refused:
		return "refused before the handler"
	case o.adminErr:
		return "TAdminError " + o.code.String()
	}
	return "success"
}

// fuzzCallHeader decodes the request's message header, when it has one.
func fuzzCallHeader(body []byte, tconf *thrift.TConfiguration) (string, int32, bool) {
	buf := thrift.NewTMemoryBufferLen(len(body))
	buf.Write(body)
	// The generated processor does not look at the message type: whatever
	// the type byte says, the message is served as a call.
	name, _, seq, err := thrift.NewTBinaryProtocolConf(buf, tconf).ReadMessageBegin(context.Background())
	return name, seq, err == nil
}

// fuzzCheckReply checks the reply is one well-formed framed message and
// says what it answered.
func fuzzCheckReply(t *testing.T, reply []byte, perr thrift.TException, name string, seq int32, callOK bool,
	tconf *thrift.TConfiguration) replyOutcome {
	t.Helper()
	ctx := context.Background()
	if len(reply) == 0 {
		if perr == nil {
			t.Fatalf("%s: no reply, and Process reported no error", name)
		}
		return replyOutcome{refused: true}
	}
	if len(reply) < 4 || int(binary.BigEndian.Uint32(reply)) != len(reply)-4 {
		t.Fatalf("%s: the reply is not exactly one frame (%d bytes)", name, len(reply))
	}
	buf := thrift.NewTMemoryBufferLen(len(reply))
	buf.Write(reply[4:])
	p := thrift.NewTBinaryProtocolConf(buf, tconf)
	rname, typ, rseq, err := p.ReadMessageBegin(ctx)
	if err != nil {
		t.Fatalf("%s: reply header: %v", name, err)
	}
	if callOK && (rname != name || rseq != seq) {
		t.Fatalf("reply to %q seq %d is for %q seq %d", name, seq, rname, rseq)
	}
	var o replyOutcome
	switch typ {
	case thrift.EXCEPTION:
		x := thrift.NewTApplicationException(0, "")
		if err := x.Read(ctx, p); err != nil {
			t.Fatalf("%s: exception reply does not decode: %v", name, err)
		}
		// Handlers answer TAdminError only: an INTERNAL_ERROR exception
		// means one returned another error, whose text went to the client.
		if x.TypeId() == thrift.INTERNAL_ERROR {
			t.Fatalf("%s: a handler returned an error that is not a TAdminError: %v", name, x)
		}
		o.refused = true
	case thrift.REPLY:
		if !callOK {
			t.Fatalf("a REPLY to a message without a header (%q)", name)
		}
		o = fuzzReadResult(t, p, name)
	default:
		t.Fatalf("%s: reply of message type %d", name, typ)
	}
	if err := p.ReadMessageEnd(ctx); err != nil {
		t.Fatalf("%s: reply end: %v", name, err)
	}
	if n := buf.Len(); n != 0 {
		t.Fatalf("%s: %d bytes left after the reply", name, n)
	}
	return o
}

// fuzzReadResult reads a result struct: at most one field, success (id 0)
// or the declared TAdminError (id 1).
func fuzzReadResult(t *testing.T, p thrift.TProtocol, name string) replyOutcome {
	t.Helper()
	ctx := context.Background()
	var o replyOutcome
	if _, err := p.ReadStructBegin(ctx); err != nil {
		t.Fatalf("%s: result: %v", name, err)
	}
	fields := 0
	for {
		_, ft, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			t.Fatalf("%s: result field: %v", name, err)
		}
		if ft == thrift.STOP {
			break
		}
		fields++
		switch {
		case id == 0:
			if err := p.Skip(ctx, ft); err != nil {
				t.Fatalf("%s: success value: %v", name, err)
			}
		case id == 1 && ft == thrift.STRUCT:
			ae := adminapi.NewTAdminError()
			if err := ae.Read(ctx, p); err != nil {
				t.Fatalf("%s: TAdminError does not decode: %v", name, err)
			}
			if ae.Code.String() == "<UNSET>" {
				t.Fatalf("%s: TAdminError with unknown code %d", name, ae.Code)
			}
			o.adminErr, o.code = true, ae.Code
		default:
			t.Fatalf("%s: result field %d of type %v", name, id, ft)
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if fields > 1 {
		t.Fatalf("%s: result with %d fields set", name, fields)
	}
	return o
}

// fuzzAdmin is one leader's admin Server over a fresh FSM.
type fuzzAdmin struct {
	srv  *Server
	prop *raftfsmtest.Proposer
	fsm  *raftfsm.FSM

	mu     sync.Mutex
	fatals []error
}

func (fx *fuzzAdmin) fatal() error {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if len(fx.fatals) == 0 {
		return nil
	}
	return fx.fatals[0]
}

// fuzzView is the replicated state apart from the log position.
type fuzzView struct {
	Jobs     []*journal.TJobRecord
	Catalogs []*journal.TCatalogRecord
	Backends []*journal.TBackendRecord
	Options  map[string]string
	LastJob  int64
}

func (fx *fuzzAdmin) view() fuzzView {
	st := fx.fsm.State()
	v := fuzzView{Options: st.OptionValues(), LastJob: st.LastJobID()}
	recs, _ := st.ListJobs(raftfsm.JobFilter{}, 0, 0)
	for _, r := range recs {
		v.Jobs = append(v.Jobs, raftfsm.RecordToThrift(r))
	}
	for _, c := range st.Catalogs() {
		v.Catalogs = append(v.Catalogs, raftfsm.CatalogToThrift(c))
	}
	for _, b := range st.Backends() {
		v.Backends = append(v.Backends, raftfsm.BackendToThrift(b))
	}
	return v
}

const (
	fuzzBackendAddr = "10.0.0.1:9070"
	fuzzLocator     = "/data/lake/db/items.lance"
)

// newFuzzAdmin builds the fixture: catalog "lake" rooted at /data/lake with
// credentials, a backend (answered in memory), job 1 PENDING on db.items.
func newFuzzAdmin(t *testing.T) *fuzzAdmin {
	t.Helper()
	fsm := raftfsm.New(zap.NewNop())
	fx := &fuzzAdmin{fsm: fsm, prop: &raftfsmtest.Proposer{FSM: fsm}}
	fsm.OnFatal = func(err error) { fx.mu.Lock(); fx.fatals = append(fx.fatals, err); fx.mu.Unlock() }
	fx.srv = New(Deps{
		Proposer: fx.prop, Reader: fsm, Cluster: fakeCluster{fx.prop}, Backends: fuzzBackends{},
		Credentials: config.StaticCredentials{"lake-creds": {"aws_secret_access_key": canarySecret}},
		Reports:     report.New(report.Deps{Proposer: fx.prop, Reader: fsm}),
		Clock:       func() time.Time { return time.UnixMilli(1_700_000_000_000) },
		Logger:      zap.NewNop(), InspectTimeout: time.Second, NodeID: "m1",
	})
	ctx := context.Background()
	root, creds := "/data/lake", "lake-creds"
	if _, err := fx.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, ""); err != nil {
		t.Fatalf("create catalog: %v", err)
	}
	if _, err := fx.srv.AddBackend(ctx, fuzzBackendAddr, ""); err != nil {
		t.Fatalf("add backend: %v", err)
	}
	if _, err := fx.srv.CreateIndex(ctx, createReq("items", "id_btree", "id", "BTREE")); err != nil {
		t.Fatalf("create index: %v", err)
	}
	return fx
}

// fuzzBackends answers inspect from memory: db.items exists, nothing else.
type fuzzBackends struct{}

func (fuzzBackends) Inspect(_ context.Context, _ string, r *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
	if r.GetDatasetURI() != fuzzLocator {
		return &wire.TInspectDatasetResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_FOUND,
			ErrorMsgs: []string{"dataset not found"}}}, nil
	}
	v, dim, et := int64(7), int32(8), "float32"
	return &wire.TInspectDatasetResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, DatasetVersion: &v,
		Fields: []*wire.TLanceField{
			{FieldID: 0, Name: "id", DataType: "int32"},
			{FieldID: 1, Name: "vector", DataType: "fixed_size_list", ListDimension: &dim, ElementType: &et},
			{FieldID: 2, Name: "text", DataType: "utf8", Nullable: true},
		},
		Indexes: []*wire.TLanceIndexInfo{{Name: "id_idx", IndexType: "BTREE", Columns: []string{"id"}}}}, nil
}

func (fuzzBackends) Submit(context.Context, string, *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
	return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
}

func (fuzzBackends) Heartbeat(context.Context, string, *wire.THeartbeatRequest) (*wire.THeartbeatResponse, error) {
	return &wire.THeartbeatResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, BeProcessEpoch: 1}, nil
}

func (fuzzBackends) Query(context.Context, string, *wire.TQueryInvocationsRequest) (*wire.TQueryInvocationsResponse, error) {
	return &wire.TQueryInvocationsResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}}, nil
}

func (fuzzBackends) JobLog(context.Context, string, *wire.TJobLogRequest) (*wire.TJobLogResponse, error) {
	return &wire.TJobLogResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR}}, nil
}

func (fuzzBackends) ProbeStore(context.Context, string, *wire.TProbeStoreRequest) (*wire.TProbeStoreResponse, error) {
	return &wire.TProbeStoreResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR}}, nil
}

func (fuzzBackends) Resolve(context.Context, string, *wire.TResolveJobRequest) (*wire.TResolveJobResponse, error) {
	return &wire.TResolveJobResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_NOT_IMPLEMENTED_ERROR}}, nil
}

// fuzzAdminSeeds is a valid call of (nearly) every method against the
// fixture, and malformed messages.
func fuzzAdminSeeds(t *testing.T) map[string][]byte {
	t.Helper()
	call := func(name string, args thrift.TStruct) []byte { return rpctest.CallMessage(t, name, 7, args) }
	str := thrift.StringPtr
	cmd, err := raftfsm.Encode(raftfsm.CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: options.OptMaxDispatchPerRound, Value: "9"})
	if err != nil {
		t.Fatal(err)
	}
	limit := int32(10)
	code := wire.TLanceIndexJobResultCode_NATIVE_OK
	seeds := map[string][]byte{
		"createIndex": call("createIndex", &adminapi.LanceMasterServiceCreateIndexArgs{
			Request: createReq("items", "vec_idx", "vector", "IVF_PQ", "num_partitions", "4", "num_sub_vectors", "2")}),
		"createIndex-replace": call("createIndex", &adminapi.LanceMasterServiceCreateIndexArgs{Request: func() *adminapi.TCreateIndexRequest {
			r := createReq("items", "id_idx", "id", "BTREE")
			r.Replace, r.Creator = thrift.BoolPtr(true), str("alice")
			return r
		}()}),
		"dropIndex": call("dropIndex", &adminapi.LanceMasterServiceDropIndexArgs{Request: &adminapi.TDropIndexRequest{
			Catalog: "lake", Db: "db", Table: "items", IndexName: "id_idx", IfExists: thrift.BoolPtr(true)}}),
		"optimizeDataset": call("optimizeDataset", &adminapi.LanceMasterServiceOptimizeDatasetArgs{Request: &adminapi.TOptimizeRequest{
			Catalog: "lake", Db: "db", Table: "items", Creator: str("alice")}}),
		"listJobs": call("listJobs", &adminapi.LanceMasterServiceListJobsArgs{Request: &adminapi.TListJobsRequest{
			Catalog: str("lake"), State: str("PENDING"), Limit: &limit}}),
		"showJob":   call("showJob", &adminapi.LanceMasterServiceShowJobArgs{JobID: 1, Consistent: true}),
		"cancelJob": call("cancelJob", &adminapi.LanceMasterServiceCancelJobArgs{Request: &adminapi.TCancelRequest{JobID: 1, Actor: str("ops")}}),
		"resolveJob": call("resolveJob", &adminapi.LanceMasterServiceResolveJobArgs{Request: &adminapi.TResolveRequest{
			JobID: 1, ForceRelease: true, Comment: "stuck"}}),
		"inspectDataset": call("inspectDataset", &adminapi.LanceMasterServiceInspectDatasetArgs{Catalog: "lake", Db: "db", Table: "items"}),
		"createCatalog": call("createCatalog", &adminapi.LanceMasterServiceCreateCatalogArgs{Catalog: &adminapi.TCatalog{
			Name: "sea", RootURI: str("s3://bucket/sea"), RefreshKind: str("webhook"), RefreshURL: str("https://hook.example/x")}}),
		// CI's fuzzer found this one journaled and then refused by the FSM.
		"createCatalogURLWithoutWebhook": call("createCatalog", &adminapi.LanceMasterServiceCreateCatalogArgs{Catalog: &adminapi.TCatalog{
			Name: "sea", RootURI: str("s3://bucket/sea"), RefreshURL: str("https://hook.example/x")}}),
		"createCatalogMySQL": call("createCatalog", &adminapi.LanceMasterServiceCreateCatalogArgs{Catalog: &adminapi.TCatalog{
			Name: "doris", RootURI: str("s3://bucket/doris"), RefreshKind: str("mysql"), RefreshAddress: str("127.0.0.1:9030"),
			RefreshCredentialsRef: str("doris-refresh"), RefreshStatement: str("REFRESH TABLE {catalog}.{db}.{table}"),
			OptimizeUnindexedRows: thrift.Int64Ptr(1000)}}),
		"updateCatalogOptimize": call("updateCatalog", &adminapi.LanceMasterServiceUpdateCatalogArgs{Request: &adminapi.TUpdateCatalogRequest{
			Name: "lake", OptimizeUnindexedRows: thrift.Int64Ptr(5), OptimizeMinIntervalSecond: thrift.Int64Ptr(60)}}),
		"listCatalogs": call("listCatalogs", &adminapi.LanceMasterServiceListCatalogsArgs{}),
		"updateCatalog": call("updateCatalog", &adminapi.LanceMasterServiceUpdateCatalogArgs{Request: &adminapi.TUpdateCatalogRequest{
			Name: "lake", CredentialsRef: str("rotated")}}),
		"removeCatalog":  call("removeCatalog", &adminapi.LanceMasterServiceRemoveCatalogArgs{Name: "lake"}),
		"addBackend":     call("addBackend", &adminapi.LanceMasterServiceAddBackendArgs{Address: "10.0.0.2:9070"}),
		"listBackends":   call("listBackends", &adminapi.LanceMasterServiceListBackendsArgs{}),
		"removeBackend":  call("removeBackend", &adminapi.LanceMasterServiceRemoveBackendArgs{Backend: fuzzBackendAddr}),
		"getOption":      call("getOption", &adminapi.LanceMasterServiceGetOptionArgs{Key: options.OptMaxDispatchPerRound}),
		"setOption":      call("setOption", &adminapi.LanceMasterServiceSetOptionArgs{Key: options.OptMaxDispatchPerRound, Value: "5"}),
		"listOptions":    call("listOptions", &adminapi.LanceMasterServiceListOptionsArgs{}),
		"listPeers":      call("listPeers", &adminapi.LanceMasterServiceListPeersArgs{}),
		"transferLeader": call("transferLeader", &adminapi.LanceMasterServiceTransferLeaderArgs{TargetID: "m2"}),
		"forwardApply":   call("forwardApply", &adminapi.LanceMasterServiceForwardApplyArgs{Command: cmd}),
		"reportLanceIndexJobResult": call("reportLanceIndexJobResult", &adminapi.LanceMasterServiceReportLanceIndexJobResultArgs{
			Report: &wire.TLanceIndexJobReport{JobID: 1, DispatchRevision: 1, InvocationID: "inv", BeProcessEpoch: 1,
				ResultCode: &code, InvocationSecret: str("guess")}}),
		"reportLanceIndexJobTermination": call("reportLanceIndexJobTermination", &adminapi.LanceMasterServiceReportLanceIndexJobTerminationArgs{
			Report: &wire.TLanceIndexJobTerminationReport{JobID: 1, DispatchRevision: 1, InvocationID: "inv", BeProcessEpoch: 1,
				Proof: wire.TLanceIndexTerminationProof_CHILD_REAPED}}),
		"beginSnapshotSave":     call("beginSnapshotSave", &adminapi.LanceMasterServiceBeginSnapshotSaveArgs{}),
		"readSnapshotChunk":     call("readSnapshotChunk", &adminapi.LanceMasterServiceReadSnapshotChunkArgs{TransferID: "x", Offset: 0}),
		"beginSnapshotRestore":  call("beginSnapshotRestore", &adminapi.LanceMasterServiceBeginSnapshotRestoreArgs{Size: 1024}),
		"finishSnapshotRestore": call("finishSnapshotRestore", &adminapi.LanceMasterServiceFinishSnapshotRestoreArgs{TransferID: "x"}),
		"abortSnapshotTransfer": call("abortSnapshotTransfer", &adminapi.LanceMasterServiceAbortSnapshotTransferArgs{TransferID: "x"}),
		"writeSnapshotChunk": call("writeSnapshotChunk", &adminapi.LanceMasterServiceWriteSnapshotChunkArgs{Chunk: &adminapi.TSnapshotChunk{
			TransferID: "x", Offset: 0, Data: []byte("LMSNAP")}}),
		"addVoter": call("addVoter", &adminapi.LanceMasterServiceAddVoterArgs{Request: &adminapi.TAddVoterRequest{
			ID: "m4", RaftAddress: "127.0.0.1:1"}}),
		"removePeer": call("removePeer", &adminapi.LanceMasterServiceRemovePeerArgs{Request: &adminapi.TRemovePeerRequest{ID: "m3"}}),
		// Malformed: an unknown method, an args struct of the wrong type, a
		// list header claiming 10^8 entries, a non-strict header, nothing.
		"unknownMethod":   call("noSuchMethod", &adminapi.LanceMasterServiceListPeersArgs{}),
		"wrongArgs":       call("createIndex", &adminapi.LanceMasterServiceShowJobArgs{JobID: 1}),
		"listBomb":        rpctest.ListBombCall("createIndex", 7, thrift.STRUCT),
		"nonStrictHeader": {0, 0, 0, 9, 'l', 'i', 's', 't', 'P', 'e', 'e', 'r', 's', 1, 0, 0, 0, 1, 0},
		"empty":           {},
	}
	return seeds
}

// TestWriteFuzzAdminRequestSeeds (re)writes the committed seed corpus when
// LANCEMASTER_WRITE_FUZZ_SEEDS=1, and checks every method has a seed.
func TestWriteFuzzAdminRequestSeeds(t *testing.T) {
	seeds := fuzzAdminSeeds(t)
	var missing []string
	for name := range adminapi.NewLanceMasterServiceProcessor(nil).ProcessorMap() {
		if _, ok := seeds[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Logf("methods without a seed (add one to fuzzAdminSeeds): %s", strings.Join(missing, ", "))
	}
	if os.Getenv("LANCEMASTER_WRITE_FUZZ_SEEDS") != "1" {
		return
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzAdminRequest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
