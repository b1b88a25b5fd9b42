package admin

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"go.uber.org/zap"
)

// The bookkeeping of operator snapshot transfers (snapshot.go): at most
// maxSnapshotTransfers open at once, each with its spool, ended by its
// finish, an abort or snapshotIdleTimeout without a call.

// snapshotTransfers is the table of a master's transfers; its zero value
// is ready.
type snapshotTransfers struct {
	mu sync.Mutex
	m  map[string]*snapshotTransfer
}

type snapshotTransfer struct {
	id   string
	src  SnapshotSource // save
	sink SnapshotSink   // restore
	size int64

	idle time.Duration // snapshotIdleTimeout when it began

	mu     sync.Mutex // one chunk call at a time
	offset int64
	done   bool // finished, aborted or expired: the resources are released
	timer  *time.Timer
}

func (s *Server) snapshotCluster() (SnapshotCluster, error) {
	sc, ok := s.d.Cluster.(SnapshotCluster)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_UNAVAILABLE, "operator snapshots are not available on this master")
	}
	return sc, nil
}

// reserve adds a placeholder transfer, or answers UNAVAILABLE when the
// table is full. The placeholder is locked until it is published.
func (s *Server) reserveTransfer() (*snapshotTransfer, error) {
	tb := &s.xfers
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.m) >= maxSnapshotTransfers {
		return nil, adminError(adminapi.TErrorCode_UNAVAILABLE,
			"%d snapshot transfers are already running on this master; retry when one has finished", len(tb.m))
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	t := &snapshotTransfer{id: hex.EncodeToString(b[:]), idle: snapshotIdleTimeout}
	t.mu.Lock()
	if tb.m == nil {
		tb.m = map[string]*snapshotTransfer{}
	}
	tb.m[t.id] = t
	return t, nil
}

// publish arms the idle timer and unlocks a reserved transfer.
func (s *Server) publishTransfer(t *snapshotTransfer) {
	t.timer = time.AfterFunc(t.idle, func() {
		if s.dropTransfer(t.id) {
			s.d.Logger.Warn("snapshot transfer dropped: idle too long", zap.String("transfer_id", t.id),
				zap.Duration("idle_timeout", t.idle))
		}
	})
	t.mu.Unlock()
}

// transfer returns a live transfer, locked; release it with t.release.
func (s *Server) transfer(id string) (*snapshotTransfer, error) {
	s.xfers.mu.Lock()
	t := s.xfers.m[id]
	s.xfers.mu.Unlock()
	if t != nil {
		t.mu.Lock()
		if !t.done {
			t.timer.Stop()
			return t, nil
		}
		t.mu.Unlock()
	}
	return nil, adminError(adminapi.TErrorCode_NOT_FOUND,
		"no snapshot transfer %q on this master: it finished, was aborted, was dropped when idle, "+
			"or began on another master; start again", clipID(id))
}

// release re-arms the idle timer of a live transfer and unlocks it.
func (t *snapshotTransfer) release() {
	if !t.done {
		t.timer.Reset(t.idle)
	}
	t.mu.Unlock()
}

// closeLocked releases the transfer's resources (t.mu held).
func (t *snapshotTransfer) closeLocked() {
	if t.done {
		return
	}
	t.done = true
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.src != nil {
		_ = t.src.Close()
	}
	if t.sink != nil {
		_ = t.sink.Discard()
	}
}

// forget removes t from the table (t.mu may be held).
func (s *Server) forget(t *snapshotTransfer) {
	s.xfers.mu.Lock()
	if s.xfers.m[t.id] == t {
		delete(s.xfers.m, t.id)
	}
	s.xfers.mu.Unlock()
}

// dropTransfer removes and closes a transfer; false when it was gone.
func (s *Server) dropTransfer(id string) bool {
	s.xfers.mu.Lock()
	t := s.xfers.m[id]
	delete(s.xfers.m, id)
	s.xfers.mu.Unlock()
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	was := !t.done
	t.closeLocked()
	return was
}

// endLocked closes t and removes it from the table (t.mu held, released).
func (s *Server) endLocked(t *snapshotTransfer) {
	t.closeLocked()
	s.forget(t)
	t.mu.Unlock()
}
