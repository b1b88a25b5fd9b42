package rpc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
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

// newMasterClientFunc makes a MasterClient for addrs, closed when t ends.
type newMasterClientFunc func(t *testing.T, addrs []string) *MasterClient

// eachMasterClient runs test with the client that dials per attempt and
// with the one on shared connections: the failover rules are the same.
func eachMasterClient(t *testing.T, test func(t *testing.T, newMC newMasterClientFunc)) {
	for name, mk := range map[string]func([]string, Config, *zap.Logger) *MasterClient{
		"fresh": NewMasterClient, "shared": NewSharedMasterClient,
	} {
		t.Run(name, func(t *testing.T) {
			test(t, func(t *testing.T, addrs []string) *MasterClient {
				mc := mk(addrs, DefaultConfig(), zaptest.NewLogger(t))
				t.Cleanup(mc.Close)
				return mc
			})
		})
	}
}

func TestMasterClientSkipsUnreachableAddresses(t *testing.T) {
	eachMasterClient(t, func(t *testing.T, newMC newMasterClientFunc) {
		m2 := &fakeMaster{name: "m2"}
		addr2 := startMaster(t, m2)
		mc := newMC(t, []string{refusedAddr(t), refusedAddr(t), addr2})
		if got, err := leaderOf(t, mc); err != nil || got != "m2" {
			t.Fatalf("Call = %q, %v", got, err)
		}
	})
}

func TestMasterClientFollowsNotLeaderOnce(t *testing.T) {
	eachMasterClient(t, func(t *testing.T, newMC newMasterClientFunc) {
		leader := &fakeMaster{name: "leader"}
		leaderAddr := startMaster(t, leader)
		follower := &fakeMaster{name: "f", answer: func() error { return notLeader(leaderAddr) }}
		followerAddr := startMaster(t, follower)

		mc := newMC(t, []string{followerAddr})
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
	})
}

func TestMasterClientRedirectsOnlyOnce(t *testing.T) {
	eachMasterClient(t, func(t *testing.T, newMC newMasterClientFunc) {
		var bAddr string
		a := &fakeMaster{name: "a"}
		aAddr := startMaster(t, a)
		b := &fakeMaster{name: "b", answer: func() error { return notLeader(aAddr) }}
		bAddr = startMaster(t, b)
		a.answer = func() error { return notLeader(bAddr) } // a and b point at each other

		_, err := leaderOf(t, newMC(t, []string{aAddr}))
		var ae *adminapi.TAdminError
		if !errors.As(err, &ae) || ae.Code != adminapi.TErrorCode_NOT_LEADER {
			t.Fatalf("err = %v, want NOT_LEADER", err)
		}
		if a.calls.Load() != 1 || b.calls.Load() != 1 {
			t.Fatalf("calls: a %d b %d, want one each", a.calls.Load(), b.calls.Load())
		}
	})
}

func TestMasterClientNotLeaderWithoutAddressIsReturned(t *testing.T) {
	eachMasterClient(t, func(t *testing.T, newMC newMasterClientFunc) {
		m1 := &fakeMaster{name: "m1", answer: func() error { return notLeader("") }}
		m2 := &fakeMaster{name: "m2"}
		_, err := leaderOf(t, newMC(t, []string{startMaster(t, m1), startMaster(t, m2)}))
		var ae *adminapi.TAdminError
		if !errors.As(err, &ae) || ae.Code != adminapi.TErrorCode_NOT_LEADER || m2.calls.Load() != 0 {
			t.Fatalf("err = %v, m2 calls %d", err, m2.calls.Load())
		}
	})
}

func TestMasterClientNeverRepeatsACallThatMayHaveBeenSent(t *testing.T) {
	eachMasterClient(t, func(t *testing.T, newMC newMasterClientFunc) {
		m1 := &fakeMaster{name: "m1", answer: func() error { return thrift.ErrAbandonRequest }}
		m2 := &fakeMaster{name: "m2"}
		mc := newMC(t, []string{startMaster(t, m1), startMaster(t, m2)})
		_, err := leaderOf(t, mc)
		if se := asSendError(t, err); !se.BytesMayHaveLeft {
			t.Fatalf("err = %+v", se)
		}
		if m2.calls.Load() != 0 {
			t.Fatal("a call that may have been sent was repeated on another master")
		}
	})
}

func TestMasterClientNothingReachable(t *testing.T) {
	eachMasterClient(t, func(t *testing.T, newMC newMasterClientFunc) {
		_, err := leaderOf(t, newMC(t, []string{refusedAddr(t), refusedAddr(t)}))
		if !errors.Is(err, ErrNoMaster) || !NotSent(err) {
			t.Fatalf("err = %v", err)
		}
		_, err = leaderOf(t, newMC(t, nil))
		if !errors.Is(err, ErrNoMaster) {
			t.Fatalf("no addresses: %v", err)
		}
	})
}

// The shared client makes every call to one master on one connection, many
// at once, and closing it closes that connection.
func TestSharedMasterClientKeepsOneConnection(t *testing.T) {
	m := &fakeMaster{name: "m"}
	s := startServer(t, adminapi.NewLanceMasterServiceProcessor(m), DefaultConfig())
	mc := NewSharedMasterClient([]string{s.Addr().String()}, DefaultConfig(), nil)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if out, err := mc.ForwardApply(testCtx(t), s.Addr().String(), []byte("x")); err != nil || string(out) != "m:x" {
				t.Errorf("ForwardApply = %q, %v", out, err)
			}
		})
	}
	wg.Wait()
	if s.ln.total.Load() != 1 || m.calls.Load() != 20 {
		t.Fatalf("%d calls over %d connections, want 20 over 1", m.calls.Load(), s.ln.total.Load())
	}
	mc.Close()
	waitFor(t, "the connection to close", func() bool { return s.ActiveConns() == 0 })
	if _, err := mc.ForwardApply(testCtx(t), s.Addr().String(), []byte("x")); !NotSent(err) {
		t.Fatalf("after Close: %v, want not sent", err)
	}
}
