package admin

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// AddBackend registers a backend by HOST:PORT.
func (s *Server) AddBackend(ctx context.Context, address, claimed string) (*adminapi.TBackend, error) {
	if err := validateHostPort(address); err != nil {
		return nil, err
	}
	who, err := claimOf(ctx, claimed)
	if err != nil {
		return nil, err
	}
	if err := s.current(ctx); err != nil {
		return nil, err
	}
	resp, err := s.propose(ctx, raftfsm.CmdAddBackend, &journal.TBackendCommand{NowMs: s.nowMs(), Address: address, Audit: who})
	if err != nil {
		return nil, err
	}
	s.d.Logger.Info("backend added", zap.Int64("backend_id", resp.GetID()), zap.String("address", address))
	st := s.d.Reader.State()
	b, ok := st.Backend(resp.GetID())
	if !ok {
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "backend %d does not exist", resp.GetID())
	}
	v := s.backendView(st, b)
	if w := s.probeBackend(ctx, address); w != "" {
		v.Warning = &w
		s.d.Logger.Warn("added backend did not answer the probe", zap.Int64("backend_id", b.ID), zap.String("address", address), zap.String("warning", w))
	}
	return v, nil
}

// probeBackendTimeout bounds the connection attempt of backends add.
const probeBackendTimeout = 2 * time.Second

// probeBackend tries the address once, after the backend is registered: an
// operator who typed the wrong port hears it now rather than from a job
// that never runs. It never refuses: a backend may be added before it
// starts. The warning is "" when something answered.
func (s *Server) probeBackend(ctx context.Context, address string) string {
	if s.d.ProbeBackend == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, probeBackendTimeout)
	defer cancel()
	if err := s.d.ProbeBackend(ctx, address); err != nil {
		return fmt.Sprintf("nothing answered at %s (%v); the backend is registered, and is dispatchable once it answers the leader's heartbeat", address, err)
	}
	return ""
}

// ListBackends lists backends by id with their held slots and, where the
// leader has heard from them, liveness and epoch.
//
// Liveness and epochs are leader-local (heartbeats), so a follower asks the
// leader, and falls back to its own view (without them) when it cannot.
func (s *Server) ListBackends(ctx context.Context) ([]*adminapi.TBackend, error) {
	if !s.d.Proposer.IsLeader() && s.d.LeaderCall != nil {
		if _, addr := s.d.Cluster.Leader(); addr != "" {
			var out []*adminapi.TBackend
			err := s.d.LeaderCall(ctx, addr, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				out, err = c.ListBackends(ctx)
				return err
			})
			if err == nil {
				return out, nil
			}
			s.d.Logger.Debug("list backends: the leader could not be asked; answering locally", zap.Error(err))
		}
	}
	st := s.d.Reader.State()
	out := []*adminapi.TBackend{}
	for _, b := range st.Backends() {
		out = append(out, s.backendView(st, b))
	}
	return out, nil
}

// resolveBackend finds a registered backend by id or HOST:PORT.
func resolveBackend(st *raftfsm.State, ref string) (*raftfsm.Backend, error) {
	if n, err := strconv.ParseInt(ref, 10, 64); err == nil {
		if b, ok := st.Backend(n); ok {
			return b, nil
		}
	} else if b, ok := st.BackendByAddress(ref); ok {
		return b, nil
	}
	if len(ref) > 300 {
		ref = ref[:300]
	}
	return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "backend %q is not registered", ref)
}

// RemoveBackend unregisters a backend by id or HOST:PORT. A backend holding
// possible-live slots is BACKEND_IN_USE: its workers may still run.
func (s *Server) RemoveBackend(ctx context.Context, ref, claimed string) error {
	who, err := claimOf(ctx, claimed)
	if err != nil {
		return err
	}
	if err := s.current(ctx); err != nil {
		return err
	}
	st := s.d.Reader.State()
	var id int64
	if n, err := strconv.ParseInt(ref, 10, 64); err == nil {
		id = n
	} else if b, ok := st.BackendByAddress(ref); ok {
		id = b.ID
	} else {
		if len(ref) > 300 {
			ref = ref[:300]
		}
		return adminError(adminapi.TErrorCode_NOT_FOUND, "backend %q is not registered", ref)
	}
	if _, err := s.propose(ctx, raftfsm.CmdRemoveBackend, &journal.TRemoveBackendCommand{NowMs: s.nowMs(), BackendID: id, Audit: who}); err != nil {
		return err
	}
	s.d.Logger.Info("backend removed", zap.Int64("backend_id", id))
	return nil
}

func (s *Server) backendView(st *raftfsm.State, b *raftfsm.Backend) *adminapi.TBackend {
	held := int32(st.HeldSlots(b.ID))
	at := b.AddTimeMs
	v := &adminapi.TBackend{BackendID: b.ID, Address: b.Address, AddTimeMs: &at, HeldSlots: &held}
	if b.Drained {
		v.Drained = thrift.BoolPtr(true)
	}
	v.DrainTimeMs, v.DrainActor = nonZero(b.DrainTimeMs), nonEmpty(b.DrainActor)
	if s.d.BackendView != nil {
		if alive, epoch, known := s.d.BackendView(b.ID); known {
			v.Alive, v.ProcessEpoch = &alive, &epoch
		}
	}
	if s.d.BackendHeard != nil {
		last, version, leading := s.d.BackendHeard(b.ID)
		if version != "" {
			v.Version = &version
		}
		if leading && v.Alive == nil {
			// The leader heartbeats it and has no answer: not alive, never "unknown".
			v.Alive = thrift.BoolPtr(false)
		}
		if !last.IsZero() {
			ms := last.UnixMilli()
			v.LastHeardMs = &ms
		}
	}
	return v
}

func validateHostPort(addr string) error {
	if len(addr) > 300 {
		return adminError(adminapi.TErrorCode_INVALID, "backend address is %d bytes; at most 300 are allowed", len(addr))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return adminError(adminapi.TErrorCode_INVALID, "backend address must be HOST:PORT")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return adminError(adminapi.TErrorCode_INVALID, "backend port must be between 1 and 65535")
	}
	return nil
}
