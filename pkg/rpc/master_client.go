package rpc

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/certs"
)

// ErrNoMaster is wrapped by MasterClient errors when no master could be
// connected to.
var ErrNoMaster = errors.New("rpc: no master reachable")

// MasterClient calls the masters' LanceMasterService: the CLI uses it for the
// admin API, and masters use it to forward to the leader.
//
// Failover rules, for Call and ForwardApply alike:
//   - addresses are tried in order; one that cannot be connected to (or whose
//     call failed before any byte left, see NotSent) moves on to the next;
//   - an answer *adminapi.TAdminError NOT_LEADER that names the leader's
//     address is followed once: that address is tried next;
//   - any other error is returned as is: once bytes may have left, the call
//     may have taken effect, so it is never repeated elsewhere.
//
// Connections: a client from NewMasterClient holds none between calls (each
// attempt dials afresh: the CLI makes one call). One from
// NewSharedMasterClient (masters forwarding to the leader) keeps one shared
// connection per master address (MuxPool), many calls in flight on it; the
// rules above are the same, since a shared call's SendError is as exact.
//
// Concurrency: safe for concurrent use.
type MasterClient struct {
	addrs []string
	cfg   Config
	log   *zap.Logger
	conns *MuxPool // nil: a fresh connection per attempt
}

// NewMasterClient returns a client for the masters at addrs (host:port of
// their RPC listeners), tried in that order. A nil log discards logs.
func NewMasterClient(addrs []string, cfg Config, log *zap.Logger) *MasterClient {
	if log == nil {
		log = zap.NewNop()
	}
	return &MasterClient{addrs: append([]string(nil), addrs...), cfg: cfg.withDefaults(), log: log}
}

// NewSharedMasterClient is NewMasterClient over shared connections, one per
// master address. Close it when done.
func NewSharedMasterClient(addrs []string, cfg Config, log *zap.Logger) *MasterClient {
	m := NewMasterClient(addrs, cfg, log)
	m.conns = NewMuxPool(m.cfg, certs.RoleMaster)
	return m
}

// Close closes the shared connections (calls in flight on them fail as
// after a broken stream). A no-op for a client without them.
func (m *MasterClient) Close() {
	if m.conns != nil {
		m.conns.Close()
	}
}

// Call runs fn against a master, following the failover rules above. fn gets
// a client on a fresh connection, closed when fn returns (or on the
// address's shared connection); fn may run more than once (against
// different masters) only after a failure that proves nothing was sent, so
// it should make one call, or only idempotent ones.
// Errors from fn are returned unchanged (errors.As finds the
// *adminapi.TAdminError or the *SendError).
func (m *MasterClient) Call(ctx context.Context, fn func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error) error {
	if len(m.addrs) == 0 {
		return fmt.Errorf("%w: no master address configured", ErrNoMaster)
	}
	return m.call(ctx, m.addrs, fn)
}

// CallAt is Call against the master at addr alone (a NOT_LEADER answer that
// names another leader is still followed once).
func (m *MasterClient) CallAt(ctx context.Context, addr string, fn func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error) error {
	return m.call(ctx, []string{addr}, fn)
}

// ForwardApply sends an encoded journal command to the master at addr (the
// leader as this node last knew it) and returns the encoded Apply response.
// A NOT_LEADER answer that names another leader is followed once.
func (m *MasterClient) ForwardApply(ctx context.Context, addr string, cmd []byte) ([]byte, error) {
	var out []byte
	err := m.call(ctx, []string{addr}, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
		out, err = c.ForwardApply(ctx, cmd)
		return err
	})
	return out, err
}

func (m *MasterClient) call(ctx context.Context, addrs []string, fn func(context.Context, *adminapi.LanceMasterServiceClient) error) error {
	queue := append([]string(nil), addrs...)
	redirected := false
	var lastErr error
	for i := 0; i < len(queue); i++ {
		addr := queue[i]
		err := m.attempt(ctx, addr, fn)
		if err == nil {
			return nil
		}
		var ae *adminapi.TAdminError
		if errors.As(err, &ae) && ae.GetCode() == adminapi.TErrorCode_NOT_LEADER {
			leader := ae.GetLeaderAddress()
			if redirected || leader == "" || leader == addr {
				return err
			}
			redirected = true
			m.log.Debug("rpc: following NOT_LEADER", zap.String("from", addr), zap.String("leader", leader))
			queue = append(queue[:i+1], append([]string{leader}, queue[i+1:]...)...)
			lastErr = err
			continue
		}
		if !NotSent(err) || ctx.Err() != nil {
			return err
		}
		m.log.Debug("rpc: master unreachable; trying the next", zap.String("addr", addr), zap.Error(err))
		lastErr = err
	}
	return fmt.Errorf("%w (tried %d addresses): %w", ErrNoMaster, len(queue), lastErr)
}

func (m *MasterClient) attempt(ctx context.Context, addr string, fn func(context.Context, *adminapi.LanceMasterServiceClient) error) error {
	if m.conns != nil {
		conn, _, err := m.conns.Get(ctx, addr)
		if err != nil {
			return err
		}
		return fn(ctx, adminapi.NewLanceMasterServiceClient(conn))
	}
	conn, err := dial(ctx, addr, m.cfg, certs.RoleMaster)
	if err != nil {
		return err
	}
	defer conn.Close()
	return fn(ctx, adminapi.NewLanceMasterServiceClient(conn.Client()))
}
