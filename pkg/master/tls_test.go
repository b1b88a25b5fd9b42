package master_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/report"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// Three masters and a real backend agent, every port mutual TLS (the
// masters' certificates come from their node files' tls section), Raft
// over TLS: an admission sent to a follower is forwarded to the leader,
// dispatched to the backend and reported back to COMMITTED; the
// authorization holds on the real servers.
func TestMutualTLSClusterEndToEnd(t *testing.T) {
	pki := t.TempDir()
	if _, err := certs.WriteDevCerts(pki, certs.DevOptions{Hosts: []string{"127.0.0.1", "localhost"}, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c := mastertest.NewWith(t, func(n *config.Node) {
		n.TLS.CA, n.TLS.Cert, n.TLS.Key = certs.DevFiles(pki, certs.RoleMaster)
	}, nil)
	operator := rpctest.DevTLSConfig(t, pki, certs.RoleOperator)

	agent, err := backend.New(backend.Config{ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Masters: config.RPCAddresses(c.Nodes[0].Peers),
		Isolation: backend.IsolationBestEffort, RPC: rpctest.DevTLSConfig(t, pki, certs.RoleBackend),
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}, master.OKRunner{})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })

	l, f := c.Leader(), c.Follower()
	call := func(cfg rpc.Config, i int, fn func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return rpc.NewMasterClient([]string{c.Nodes[i].RPCAdvertise}, cfg, zap.NewNop()).Call(ctx, fn)
	}
	// Through a follower: its writes reach the leader by forwardApply
	// (master to master), its listBackends asks the leader.
	err = call(operator, f, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		root := "/data/lake"
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root}, "alice"); err != nil { // --as alice
			return err
		}
		// A local-file dataset is dispatched only on this assertion.
		if _, err := a.SetOption(ctx, options.OptEnableLocalFileMutation, "true", ""); err != nil {
			return err
		}
		_, err := a.AddBackend(ctx, agent.Addr(), "")
		return err
	})
	if err != nil {
		t.Fatalf("setup through a follower: %v", err)
	}
	eventually(t, 15*time.Second, "the leader to heartbeat the backend over TLS", func() bool {
		var bs []*adminapi.TBackend
		err := call(operator, f, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
			bs, err = a.ListBackends(ctx)
			return err
		})
		return err == nil && len(bs) == 1 && bs[0].GetAlive()
	})

	var resp *adminapi.TAdmitResponse
	err = call(operator, f, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items",
			IndexName: "id_btree", Column: "id", IndexType: "BTREE"})
		return err
	})
	if err != nil {
		t.Fatalf("admission through a follower: %v", err)
	}
	id := resp.GetJobID()
	c.WaitSettled(l, []int64{id})
	r, _ := c.Masters[l].FSM().State().Job(id)
	if r.MutationState != job.Committed || r.Result.Code != job.NativeOK {
		t.Fatalf("job %d: %s %s %q", id, r.MutationState, r.Result.Code, r.Result.Message)
	}
	// The creator is the identity the operator's certificate proves, not a
	// name anyone could type; a claimed --as name is kept beside it.
	if r.Creator != "lancemaster operator" || r.ClaimedCreator != "" {
		t.Fatalf("creator %q (claimed %q), want the certificate's %q", r.Creator, r.ClaimedCreator, "lancemaster operator")
	}
	err = call(operator, f, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items",
			IndexName: "id_bitmap", Column: "id", IndexType: "BITMAP", Creator: thrift.StringPtr("alice")})
		return err
	})
	if err != nil {
		t.Fatalf("second admission: %v", err)
	}
	c.WaitSettled(l, []int64{resp.GetJobID()})
	if r2, _ := c.Masters[l].FSM().State().Job(resp.GetJobID()); r2.Creator != "lancemaster operator" || r2.ClaimedCreator != "alice" {
		t.Fatalf("with --as alice: creator %q, claimed %q", r2.Creator, r2.ClaimedCreator)
	}
	// The audit trail names the same identity for the changes made through
	// the follower, with the claim beside it when one was made: the actor
	// travels in the forwarded command.
	for i, m := range c.Masters {
		eventually(t, 10*time.Second, fmt.Sprintf("m%d's catalog and option events name the certificate", i+1), func() bool {
			st := m.FSM().State()
			cat, _ := st.AuditEvents(raftfsm.AuditFilter{Kind: raftfsm.AuditCatalogCreate}, 0, 0)
			opt, _ := st.AuditEvents(raftfsm.AuditFilter{Kind: raftfsm.AuditOptionSet}, 0, 0)
			return len(cat) == 1 && cat[0].Actor == (raftfsm.Actor{Name: "lancemaster operator", Claimed: "alice", Verified: true}) &&
				len(opt) == 1 && opt[0].Actor == (raftfsm.Actor{Name: "lancemaster operator", Verified: true})
		})
	}
	// The result came by the backend's report (its certificate, its
	// invocation secret), not only by the leader's query.
	eventually(t, 10*time.Second, "the backend's report to be applied", func() bool {
		return c.Masters[l].Reports().Counts()[report.ReasonAppliedResult.String()] >= 1
	})

	// The authorization on the real listeners.
	create := func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items",
			IndexName: "other", Column: "id", IndexType: "BTREE"})
		return err
	}
	for _, role := range []certs.Role{certs.RoleBackend, certs.RoleMaster} {
		if err := call(rpctest.DevTLSConfig(t, pki, role), l, create); errCode(t, err) != adminapi.TErrorCode_PERMISSION_DENIED {
			t.Fatalf("a %s certificate admitted: %v", role, err)
		}
	}
	hb, err := rpc.NewThriftBackendClient(operator).Heartbeat(context.Background(), agent.Addr(), &wire.THeartbeatRequest{MasterID: "x"})
	if err != nil || hb.GetStatus().GetStatusCode() != wire.TStatusCode_NOT_AUTHORIZED {
		t.Fatalf("an operator heartbeat on the backend: %v, %v", hb, err)
	}
	if err := call(rpc.DefaultConfig(), l, create); err == nil {
		t.Fatal("a plaintext admission on a TLS master succeeded")
	}
	if n := mastertest.JobCount(c.Masters[l]); n != 2 {
		t.Fatalf("%d jobs; only the operator's two admissions may exist", n)
	}
}
