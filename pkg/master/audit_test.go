package master_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// startFourthMaster starts m4 (with join: it waits for add-voter) next to
// c's three masters and returns its peer entry.
func startFourthMaster(t *testing.T, c *mastertest.Cluster, join bool) (config.Peer, *master.Master) {
	t.Helper()
	ports := freePorts(t, 2)
	p4 := config.Peer{ID: "m4", RaftAddress: "127.0.0.1:" + strconv.Itoa(ports[0]), RPCAddress: "127.0.0.1:" + strconv.Itoa(ports[1])}
	n4 := config.DefaultNode()
	n4.NodeID, n4.DataDir, n4.Timeouts, n4.Join = "m4", t.TempDir(), config.RaftProfileFast, join
	n4.Peers = append(append([]config.Peer(nil), c.Nodes[0].Peers...), p4)
	if err := n4.Validate(); err != nil {
		t.Fatal(err)
	}
	m4, err := master.Start(opsCtx(t), master.Options{Node: n4, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		Credentials: config.StaticCredentials{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m4.Close(false) })
	return p4, m4
}

// Membership changes and a restore are not FSM commands: the leader
// journals their audit events after them. Every master ends with the same
// trail, and the restore's event, applied after the restored state, is
// there too (with the membership events the restored file carried). Each
// records the name claimed (--as), the actor on this plaintext cluster.
func TestAuditTrailOfMembershipAndRestoreOnEveryMaster(t *testing.T) {
	c := mastertest.New(t, nil)
	c.Setup(c.Leader())
	p4, m4 := startFourthMaster(t, c, true)
	call := func(fn func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error) error {
		t.Helper()
		return c.Client(c.Leader()).Call(opsCtx(t), fn)
	}
	nv, as := true, "ann"
	if err := call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: "m4", RaftAddress: p4.RaftAddress, RPCAddress: &p4.RPCAddress, NonVoter: &nv, Actor: &as})
		return err
	}); err != nil {
		t.Fatalf("add-voter --non-voter: %v", err)
	}
	eventually(t, 20*time.Second, "m4 caught up and promoted", func() bool {
		return call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			_, err := cl.Promote(ctx, &adminapi.TPromoteRequest{ID: "m4", Actor: &as})
			return err
		}) == nil
	})
	ld := c.Leader()
	to := c.Nodes[(ld+1)%3].NodeID
	if err := call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.TransferLeader(ctx, to, as)
		return err
	}); err != nil {
		t.Fatalf("transfer-leader: %v", err)
	}
	if err := call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m4", Actor: &as})
		return err
	}); err != nil {
		t.Fatalf("remove-peer: %v", err)
	}
	m4.Close(false)
	membership := []string{raftfsm.AuditRaftRemovePeer, raftfsm.AuditRaftTransferLeader, raftfsm.AuditRaftPromote, raftfsm.AuditRaftAddNonvoter}
	for i, m := range c.Masters {
		eventually(t, 15*time.Second, fmt.Sprintf("m%d has the membership events", i+1), func() bool {
			return slices.Equal(kindsOf(m.FSM().State(), "raft."), membership)
		})
		evs, _ := m.FSM().State().AuditEvents(raftfsm.AuditFilter{Kind: "raft."}, 0, 0)
		for _, e := range evs {
			if e.Actor != (raftfsm.Actor{Name: as}) {
				t.Errorf("m%d: %s by %+v, want the claim %q", i+1, e.Kind, e.Actor, as)
			}
		}
	}

	file := saveSnapshot(t, c.Client(c.Leader()))
	resp, err := restoreSnapshot(t, c.Client(c.Leader()), file)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	for i, m := range c.Masters {
		eventually(t, 15*time.Second, fmt.Sprintf("m%d has the restore's event after the restored ones", i+1), func() bool {
			st := m.FSM().State()
			evs, _ := st.AuditEvents(raftfsm.AuditFilter{Kind: raftfsm.AuditSnapshotRestore}, 0, 0)
			return len(evs) == 1 && evs[0].Index > uint64(resp.Index) && slices.Equal(kindsOf(st, "raft."), membership)
		})
	}
	// The API says the same on every master, each from its own replica,
	// with who and what.
	for i := range c.Masters {
		var out *adminapi.TListEventsResponse
		if err := c.Client(i).Call(opsCtx(t), func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) (err error) {
			out, err = cl.ListEvents(ctx, &adminapi.TListEventsRequest{Kind: new("raft.transfer-leader")})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(out.Events) != 1 || out.Events[0].Subject != to || out.Events[0].GetActor() != as {
			t.Fatalf("m%d: %v", i+1, out.Events)
		}
	}
}

func kindsOf(st *raftfsm.State, prefix string) []string {
	evs, _ := st.AuditEvents(raftfsm.AuditFilter{Kind: prefix}, 0, 0)
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}
