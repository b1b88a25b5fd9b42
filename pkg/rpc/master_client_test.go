package rpc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// fakeMaster answers ForwardApply and ListPeers; every other method of the
// embedded nil interface would panic (and be answered INTERNAL_ERROR).
type fakeMaster struct {
	adminapi.LanceMasterService
	name  string
	calls atomic.Int32
	// answer decides the reply; nil means success.
	answer func() error
}

func (m *fakeMaster) reply() error {
	m.calls.Add(1)
	if m.answer != nil {
		return m.answer()
	}
	return nil
}

func (m *fakeMaster) ForwardApply(_ context.Context, cmd []byte) ([]byte, error) {
	if err := m.reply(); err != nil {
		return nil, err
	}
	return append([]byte(m.name+":"), cmd...), nil
}

func (m *fakeMaster) ListPeers(context.Context) (*adminapi.TRaftPeersResponse, error) {
	if err := m.reply(); err != nil {
		return nil, err
	}
	id := m.name
	return &adminapi.TRaftPeersResponse{Peers: []*adminapi.TRaftPeer{}, LeaderID: &id}, nil
}

func notLeader(addr string) error {
	e := &adminapi.TAdminError{Code: adminapi.TErrorCode_NOT_LEADER, Message: "not the leader"}
	if addr != "" {
		e.LeaderAddress = &addr
	}
	return e
}

func startMaster(t *testing.T, m *fakeMaster) string {
	return startServer(t, adminapi.NewLanceMasterServiceProcessor(m), DefaultConfig()).Addr().String()
}

func leaderOf(t *testing.T, mc *MasterClient) (string, error) {
	var leader string
	err := mc.Call(testCtx(t), func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		r, err := c.ListPeers(ctx)
		if err == nil {
			leader = r.GetLeaderID()
		}
		return err
	})
	return leader, err
}

func TestMasterClientSkipsUnreachableAddresses(t *testing.T) {
	m2 := &fakeMaster{name: "m2"}
	addr2 := startMaster(t, m2)
	mc := NewMasterClient([]string{refusedAddr(t), refusedAddr(t), addr2}, DefaultConfig(), zaptest.NewLogger(t))
	if got, err := leaderOf(t, mc); err != nil || got != "m2" {
		t.Fatalf("Call = %q, %v", got, err)
	}
}

func TestMasterClientFollowsNotLeaderOnce(t *testing.T) {
	leader := &fakeMaster{name: "leader"}
	leaderAddr := startMaster(t, leader)
	follower := &fakeMaster{name: "f", answer: func() error { return notLeader(leaderAddr) }}
	followerAddr := startMaster(t, follower)

	mc := NewMasterClient([]string{followerAddr}, DefaultConfig(), nil)
	if got, err := leaderOf(t, mc); err != nil || got != "leader" {
		t.Fatalf("Call = %q, %v", got, err)
	}
	out, err := mc.ForwardApply(testCtx(t), followerAddr, []byte("cmd"))
	if err != nil || string(out) != "leader:cmd" {
		t.Fatalf("ForwardApply = %q, %v", out, err)
	}
	if follower.calls.Load() != 2 || leader.calls.Load() != 2 {
		t.Fatalf("calls: follower %d leader %d", follower.calls.Load(), leader.calls.Load())
	}
}

func TestMasterClientRedirectsOnlyOnce(t *testing.T) {
	var bAddr string
	a := &fakeMaster{name: "a"}
	aAddr := startMaster(t, a)
	b := &fakeMaster{name: "b", answer: func() error { return notLeader(aAddr) }}
	bAddr = startMaster(t, b)
	a.answer = func() error { return notLeader(bAddr) } // a and b point at each other

	_, err := leaderOf(t, NewMasterClient([]string{aAddr}, DefaultConfig(), nil))
	var ae *adminapi.TAdminError
	if !errors.As(err, &ae) || ae.Code != adminapi.TErrorCode_NOT_LEADER {
		t.Fatalf("err = %v, want NOT_LEADER", err)
	}
	if a.calls.Load() != 1 || b.calls.Load() != 1 {
		t.Fatalf("calls: a %d b %d, want one each", a.calls.Load(), b.calls.Load())
	}
}

func TestMasterClientNotLeaderWithoutAddressIsReturned(t *testing.T) {
	m1 := &fakeMaster{name: "m1", answer: func() error { return notLeader("") }}
	m2 := &fakeMaster{name: "m2"}
	_, err := leaderOf(t, NewMasterClient([]string{startMaster(t, m1), startMaster(t, m2)}, DefaultConfig(), nil))
	var ae *adminapi.TAdminError
	if !errors.As(err, &ae) || ae.Code != adminapi.TErrorCode_NOT_LEADER || m2.calls.Load() != 0 {
		t.Fatalf("err = %v, m2 calls %d", err, m2.calls.Load())
	}
}

func TestMasterClientNeverRepeatsACallThatMayHaveBeenSent(t *testing.T) {
	m1 := &fakeMaster{name: "m1", answer: func() error { return thrift.ErrAbandonRequest }}
	m2 := &fakeMaster{name: "m2"}
	mc := NewMasterClient([]string{startMaster(t, m1), startMaster(t, m2)}, DefaultConfig(), nil)
	_, err := leaderOf(t, mc)
	if se := asSendError(t, err); !se.BytesMayHaveLeft {
		t.Fatalf("err = %+v", se)
	}
	if m2.calls.Load() != 0 {
		t.Fatal("a call that may have been sent was repeated on another master")
	}
}

func TestMasterClientNothingReachable(t *testing.T) {
	_, err := leaderOf(t, NewMasterClient([]string{refusedAddr(t), refusedAddr(t)}, DefaultConfig(), nil))
	if !errors.Is(err, ErrNoMaster) || !NotSent(err) {
		t.Fatalf("err = %v", err)
	}
	_, err = leaderOf(t, NewMasterClient(nil, DefaultConfig(), nil))
	if !errors.Is(err, ErrNoMaster) {
		t.Fatalf("no addresses: %v", err)
	}
}
