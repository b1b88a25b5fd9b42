package admin

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// devTLS is role's mutual-TLS configuration from the PKI in pki.
func devTLS(t *testing.T, pki string, role certs.Role) rpc.Config {
	t.Helper()
	cfg := rpctest.DevTLSConfig(t, pki, role)
	cfg.SocketTimeout = 5 * time.Second
	return cfg
}

func events(t *testing.T, s *Server, r *adminapi.TListEventsRequest) []*adminapi.TAuditEvent {
	t.Helper()
	out, err := s.ListEvents(context.Background(), r)
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return out.Events
}

// Under mutual TLS the actor of a change is the identity the caller's
// certificate proves; a name it claims (--as) is kept apart, as a claim.
func TestAuditActorIsTheVerifiedCallerUnderMutualTLS(t *testing.T) {
	h := newHarness(t)
	pki := t.TempDir()
	if _, err := certs.WriteDevCerts(pki, certs.DevOptions{Hosts: []string{"127.0.0.1"}, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	addr := serveAdminWith(t, h, devTLS(t, pki, certs.RoleMaster), rpc.WithPolicy(rpc.MasterPolicy()))
	ctx := context.Background()
	adm, err := h.srv.CreateIndex(ctx, createReq("items", "v_idx", "vector", "IVF_PQ"))
	if err != nil {
		t.Fatal(err)
	}
	operator := devTLS(t, pki, certs.RoleOperator)
	var listed *adminapi.TListEventsResponse
	var opt *adminapi.TOption
	err = rpc.NewMasterClient([]string{addr}, operator, zap.NewNop()).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.SetOption(ctx, options.OptMaxDispatchPerRound, "4", ""); err != nil {
			return err
		}
		if _, err := a.CancelJob(ctx, &adminapi.TCancelRequest{JobID: adm.GetJobID(), Actor: new("mallory")}); err != nil {
			return err
		}
		if opt, err = a.GetOption(ctx, options.OptMaxDispatchPerRound); err != nil {
			return err
		}
		listed, err = a.ListEvents(ctx, &adminapi.TListEventsRequest{Limit: new(int32(2))})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	const cn = "lancemaster operator"
	evs := listed.Events
	if len(evs) != 2 || evs[0].Kind != raftfsm.AuditJobCancel || evs[1].Kind != raftfsm.AuditOptionSet {
		t.Fatalf("events %v", evs)
	}
	if evs[0].GetActor() != cn || evs[0].GetClaimed() != "mallory" || !evs[0].GetVerified() {
		t.Fatalf("cancel's actor %q claimed %q verified %v; want the certificate's %q", evs[0].GetActor(), evs[0].GetClaimed(), evs[0].GetVerified(), cn)
	}
	if evs[1].GetActor() != cn || evs[1].IsSetClaimed() || evs[1].GetSummary() != "value: default → 4" || evs[1].Subject != options.OptMaxDispatchPerRound {
		t.Fatalf("option event %v", evs[1])
	}
	if opt.GetChangedBy() != cn || opt.GetChangedTimeMs() != 1_700_000_000_000 {
		t.Fatalf("option changed by %q at %d", opt.GetChangedBy(), opt.GetChangedTimeMs())
	}
	if !listed.IsSetNextBeforeSeq() {
		t.Fatal("more events match (the harness's catalog and backend): no cursor")
	}
}

// Without a certificate, the claim is all there is: it is the actor, and
// it is not marked verified.
func TestAuditPlaintextRecordsTheClaim(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	adm, err := h.srv.CreateIndex(ctx, createReq("items", "v_idx", "vector", "IVF_PQ"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.CancelJob(ctx, &adminapi.TCancelRequest{JobID: adm.GetJobID(), Actor: new("bob")}); err != nil {
		t.Fatal(err)
	}
	e := events(t, h.srv, &adminapi.TListEventsRequest{Limit: new(int32(1))})[0]
	if e.GetActor() != "bob" || e.IsSetClaimed() || e.GetVerified() || e.Subject != raftfsm.JobSubject(adm.GetJobID()) {
		t.Fatalf("event %v", e)
	}
	// The harness made its catalog and backend without a claim: "operator".
	for _, e := range events(t, h.srv, &adminapi.TListEventsRequest{Kind: new("catalog.")}) {
		if e.GetActor() != "operator" || e.Subject != "lake" || !strings.Contains(e.GetSummary(), "credentials_ref: - → lake-creds") {
			t.Fatalf("catalog event %v", e)
		}
	}
}

func kinds(evs []*adminapi.TAuditEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// Filters, newest first, the cursor, and bad requests.
func TestListEventsFiltersAndCursor(t *testing.T) {
	h := newHarness(t) // catalog.create lake, backend.add 1
	ctx := context.Background()
	h.setOption(options.OptMaxDispatchPerRound, "4")
	if _, err := h.srv.AddBackend(ctx, "127.0.0.1:1", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.RemoveBackend(ctx, "127.0.0.1:1", ""); err != nil {
		t.Fatal(err)
	}
	all := events(t, h.srv, nil)
	want := []string{raftfsm.AuditBackendRemove, raftfsm.AuditBackendAdd, raftfsm.AuditOptionSet, raftfsm.AuditBackendAdd, raftfsm.AuditCatalogCreate}
	if got := kinds(all); !slices.Equal(got, want) {
		t.Fatalf("all events %v, want %v", got, want)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq >= all[i-1].Seq || all[i].Index >= all[i-1].Index {
			t.Fatalf("not newest first: %v", all)
		}
	}
	if got := kinds(events(t, h.srv, &adminapi.TListEventsRequest{Kind: new("backend.")})); len(got) != 3 {
		t.Fatalf("kind backend.: %v", got)
	}
	if got := events(t, h.srv, &adminapi.TListEventsRequest{Subject: new("127.0.0.1:1)")}); len(got) != 2 {
		t.Fatalf("subject: %v", got)
	}
	if got := events(t, h.srv, &adminapi.TListEventsRequest{Actor: new("nobody")}); len(got) != 0 {
		t.Fatalf("actor nobody: %v", got)
	}
	if got := events(t, h.srv, &adminapi.TListEventsRequest{SinceMs: new(int64(1_700_000_000_001))}); len(got) != 0 {
		t.Fatalf("since after every event: %v", got)
	}
	var paged []*adminapi.TAuditEvent
	req := &adminapi.TListEventsRequest{Limit: new(int32(2))}
	for range 5 {
		out, err := h.srv.ListEvents(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, out.Events...)
		if !out.IsSetNextBeforeSeq() {
			break
		}
		req.BeforeSeq = out.NextBeforeSeq
	}
	if !slices.Equal(kinds(paged), want) {
		t.Fatalf("paged %v", kinds(paged))
	}
	for _, bad := range []*adminapi.TListEventsRequest{{Limit: new(int32(maxListLimit + 1))}, {BeforeSeq: new(int64(-1))},
		{Subject: new(strings.Repeat("x", 10_000))}} {
		if _, err := h.srv.ListEvents(ctx, bad); errCode(t, err) != adminapi.TErrorCode_INVALID {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}

// Membership changes are not FSM commands: their event is journaled after
// the change; when that fails, the change stands and the log says the
// event is missing.
func TestAuditMembershipChanges(t *testing.T) {
	ctx := context.Background()
	cl := &opsCluster{}
	s := newOpsServer(t, cl, true)
	if _, err := s.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: "m4", RaftAddress: "127.0.0.1:7104", RPCAddress: new("127.0.0.1:7204")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m4"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransferLeader(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
	evs := events(t, s, nil)
	if got := kinds(evs); !slices.Equal(got, []string{raftfsm.AuditRaftTransferLeader, raftfsm.AuditRaftRemovePeer, raftfsm.AuditRaftAddVoter}) {
		t.Fatalf("events %v", got)
	}
	if evs[2].Subject != "m4" || evs[2].GetSummary() != "suffrage: - → voter; raft_address: 127.0.0.1:7104; rpc_address: 127.0.0.1:7204" ||
		evs[0].Subject != "m2" || evs[0].GetSummary() != "leader: m1 → m2" {
		t.Fatalf("events %v", evs)
	}

	core, logs := observer.New(zap.InfoLevel)
	s.d.Logger = zap.New(core)
	s.d.Proposer = failingAudit{s.d.Proposer}
	if _, err := s.TransferLeader(ctx, "", ""); err != nil {
		t.Fatalf("a lost audit event failed the change: %v", err)
	}
	if logs.FilterMessageSnippet("audit event is missing").Len() != 1 || len(events(t, s, nil)) != 3 {
		t.Fatalf("the missing audit event was not logged (%d logs)", logs.Len())
	}
}

// failingAudit refuses to propose audit events.
type failingAudit struct{ raftfsm.Proposer }

func (f failingAudit) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	if raftfsm.CommandType(cmd[0]) == raftfsm.CmdAudit {
		return nil, errors.New("injected: no quorum")
	}
	return f.Proposer.Propose(ctx, cmd)
}

// A restore's event is applied after the restored state, so the restore
// does not replace it; the restored file's own events are kept and the
// next seq goes above them.
func TestAuditRestoreEventSurvivesTheRestore(t *testing.T) {
	ctx := context.Background()
	s, cl := newRestoringServer(t)
	if _, err := s.AddBackend(ctx, "127.0.0.1:9", ""); err != nil { // replaced by the restore
		t.Fatal(err)
	}
	tr, err := s.BeginSnapshotRestore(ctx, int64(len(cl.restoreFile)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSnapshotChunk(ctx, &adminapi.TSnapshotChunk{TransferID: tr.TransferID, Data: cl.restoreFile}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishSnapshotRestore(ctx, tr.TransferID, ""); err != nil {
		t.Fatal(err)
	}
	evs := events(t, s, nil)
	if got := kinds(evs); !slices.Equal(got, []string{raftfsm.AuditSnapshotRestore, raftfsm.AuditOptionSet, raftfsm.AuditOptionSet}) {
		t.Fatalf("events after the restore %v", got)
	}
	if evs[0].Seq != 3 || evs[0].Subject != "snapshot of index 42" || !strings.Contains(evs[0].GetSummary(), "continues from index 100") ||
		evs[1].Subject != options.OptDispatcherPaused || evs[2].Subject != options.OptMaxDispatchPerRound {
		t.Fatalf("events after the restore %v", evs)
	}
}
