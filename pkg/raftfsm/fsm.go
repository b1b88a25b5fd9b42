package raftfsm

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/broadcast"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// FSM is the replicated state machine: it implements raft.FSM.
//
// Concurrency: Apply, Snapshot and Restore are called by raft's FSM goroutine
// only, never concurrently with each other. FSMSnapshot.Persist runs on
// another goroutine concurrently with Apply; it reads an immutable view.
// State may be called from any goroutine at any time.
type FSM struct {
	// OnFatal is called when an entry cannot be applied: an unknown command
	// type without IgnorableFlag, a body that does not decode, or a broken
	// internal invariant. Applying past such an entry would make this
	// replica diverge from the others, so the default logs the error (with
	// the type byte and log index, see FatalError) and exits with status 2.
	// Tests replace it. Set it before the FSM is handed to raft.
	OnFatal func(err error)

	logger    *zap.Logger
	state     atomic.Pointer[State] // the latest published view
	published broadcast.Signal      // after every store to state
	strs      *jobcodec.StrPool     // shares admitted strings; FSM goroutine only
}

// FatalError is what OnFatal receives.
type FatalError struct {
	Type  CommandType
	Index uint64
	Err   error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("raftfsm: log index %d, command type %d: %v", e.Index, e.Type, e.Err)
}

func (e *FatalError) Unwrap() error { return e.Err }

// New returns an empty FSM. A nil logger logs nothing.
func New(logger *zap.Logger) *FSM {
	if logger == nil {
		logger = zap.NewNop()
	}
	f := &FSM{logger: logger, strs: jobcodec.NewStrPool()}
	f.OnFatal = f.exitOnFatal
	f.state.Store(&State{m: emptyMeta()})
	return f
}

// State returns the latest applied view. It is O(1) and safe from any
// goroutine; the view never changes.
func (f *FSM) State() *State { return f.state.Load() }

// Published returns a channel closed once a view newer than every one
// published before the call is published: an entry applied (or skipped) or
// a snapshot restored. A waiter takes it before it reads State, and waits
// on it only while that view does not do, so it misses no change (package
// broadcast). Safe from any goroutine.
func (f *FSM) Published() <-chan struct{} { return f.published.Wait() }

// store publishes v as the latest view and wakes the waiters of Published.
func (f *FSM) store(v *State) {
	f.state.Store(v)
	f.published.Broadcast()
}

func (f *FSM) exitOnFatal(err error) {
	fields := []zap.Field{zap.Error(err)}
	var fe *FatalError
	if errors.As(err, &fe) {
		fields = append(fields, zap.Uint8("command_type", uint8(fe.Type)), zap.Uint64("log_index", fe.Index))
	}
	f.logger.Error("raftfsm: cannot apply a committed log entry; stopping this node so it does not diverge from the cluster", fields...)
	_ = f.logger.Sync()
	os.Exit(2)
}

// ---- the command registry ---------------------------------------------------

// command is what every journal command has: the leader's clock.
type command interface {
	thrift.TStruct
	GetNowMs() int64
}

// applyFunc decodes one command body and applies it inside t. An error means
// the entry cannot be applied at all (fatal); a failed guard is a response.
type applyFunc func(t *tx, body []byte) (*journal.TApplyResponse, error)

// registry maps each command type to its apply function. Each command family
// registers itself from its own file (admit.go, dispatch.go, ...).
var registry = map[CommandType]applyFunc{}

// register adds a command family's apply function with the command type's
// spec (commands.go): one registration carries everything about the type.
// C is the command's generated Thrift struct; newCmd allocates one to
// decode into.
func register[C command](spec CommandSpec, newCmd func() C, apply func(t *tx, cmd C) (*journal.TApplyResponse, error)) {
	registerDecoded(spec, func(body []byte) (C, int64, error) {
		cmd := newCmd()
		if err := decodeCompact(body, cmd); err != nil {
			var none C
			return none, 0, err
		}
		return cmd, cmd.GetNowMs(), nil
	}, apply)
}

// registerDecoded is register for a command that Apply reads with a decoder
// of its own instead of the generated struct's: decode returns the command
// and the leader's clock it carries. decode must accept and refuse exactly
// the bodies the generated reader does (masters of older versions read the
// same entries with it), and CheckCommand uses it too.
func registerDecoded[C any](spec CommandSpec, decode func(body []byte) (C, int64, error),
	apply func(t *tx, cmd C) (*journal.TApplyResponse, error)) {
	checkSpec(spec)
	ct := spec.Type
	specs[ct] = spec
	registry[ct] = func(t *tx, body []byte) (*journal.TApplyResponse, error) {
		cmd, now, err := decode(body)
		if err != nil {
			return nil, fmt.Errorf("undecodable command body: %w", err)
		}
		t.now = now
		return apply(t, cmd)
	}
	decoders[ct] = func(body []byte) error {
		_, _, err := decode(body)
		return err
	}
}

// Apply applies one committed entry and returns its *journal.TApplyResponse.
// It reads no clock and no random source: time comes from the command.
func (f *FSM) Apply(l *raft.Log) interface{} {
	if len(l.Data) == 0 {
		return f.fatal(0, l.Index, ErrEmptyEntry)
	}
	ct := CommandType(l.Data[0])
	fn, ok := registry[ct]
	if !ok {
		if ct&IgnorableFlag != 0 {
			f.logger.Warn("raftfsm: skipping an ignorable command type this master does not know",
				zap.Uint8("command_type", uint8(ct)), zap.Uint64("log_index", l.Index))
			f.publish(f.State().t, l.Index, *f.State().m)
			return &journal.TApplyResponse{Code: journal.TApplyCode_OK, Message: thrift.StringPtr("ignored")}
		}
		return f.fatal(ct, l.Index, errors.New("unknown command type"))
	}
	prev := f.State()
	t := &tx{tableTxn: prev.t.txn(), m: *prev.m, strs: f.strs, index: l.Index}
	resp, err := fn(t, l.Data[1:])
	if err != nil {
		// Nothing to undo: the transaction copied every node it changed,
		// and its copies are dropped with it.
		return f.fatal(ct, l.Index, err)
	}
	if t.bk != nil {
		t.m.books = t.bk.commit()
	}
	f.publish(t.commit(), l.Index, t.m)
	return resp
}

// Preview answers what Apply would answer for cmd on this state, without
// changing it: the command runs in a write transaction that is then dropped
// (the copy-on-write tables and books make that cheap and leave every reader
// of s undisturbed). A door that builds commands from client input previews
// them before proposing, so that input the FSM would refuse as INVALID is
// refused without a journal entry. The answer is advice only: the state may
// change before the entry applies, and the FSM decides again then. An error
// is a command no replica can apply (CheckCommand's cases, found while
// applying: the body is decoded once).
func (s *State) Preview(cmd []byte) (*journal.TApplyResponse, error) {
	if len(cmd) == 0 {
		return nil, ErrEmptyEntry
	}
	fn, ok := registry[CommandType(cmd[0])]
	if !ok {
		return nil, fmt.Errorf("%w %d", ErrUnknownCommand, cmd[0])
	}
	// fn decodes the body (an undecodable one is its error). strs: nil, the
	// FSM's string pool is not shared with other goroutines.
	// index: the entry would be the next one (audit events and job timelines record it).
	return fn(&tx{tableTxn: s.t.txn(), m: *s.m, index: s.m.appliedIndex + 1}, cmd[1:])
}

func (f *FSM) publish(t tables, index uint64, m meta) {
	m.appliedIndex = index
	f.store(&State{t: t, m: &m})
}

// fatal reports an entry that cannot be applied. If OnFatal returns (tests),
// nothing was changed and the response says so.
func (f *FSM) fatal(ct CommandType, index uint64, err error) *journal.TApplyResponse {
	fe := &FatalError{Type: ct, Index: index, Err: err}
	f.OnFatal(fe)
	return &journal.TApplyResponse{Code: journal.TApplyCode_INVALID, Message: thrift.StringPtr(fe.Error())}
}

// ---- the write transaction --------------------------------------------------

// tx is one entry's write transaction: copy-on-write table transactions, a
// private copy of meta and, from the first change of a counter on, a
// transaction on the books. Reads inside the entry (t.job) see its own
// earlier writes: a batch naming one job twice sees its own first change.
type tx struct {
	*tableTxn
	m       meta
	bk      *bookTxn
	now     int64
	strs    *jobcodec.StrPool
	scratch []byte // packing rows (newRow)
	index   uint64 // the entry's log index (audit.go, timeline.go)
}

// job returns the current record of id, including earlier writes of this entry.
func (t *tx) job(id int64) *job.Record {
	w, ok := jobByID(t.jobs[ixID].Version(), id)
	if !ok {
		return nil
	}
	return w.record()
}

// books reads the books as this entry left them so far.
func (t *tx) books() bookView {
	if t.bk != nil {
		return t.bk.view()
	}
	return t.m.books.view()
}

// rebook moves the books from what old held to what new holds (old and new
// are one job, or one of them is nil).
func (t *tx) rebook(old, new *job.Record) {
	if chargeOf(old) == chargeOf(new) {
		return // nothing to book; and no books transaction to open
	}
	if t.bk == nil {
		t.bk = t.m.books.txn()
	}
	book(t.bk, old, new)
}

// put swaps new in for old (nil for a new record) and books the change.
func (t *tx) put(old, new *job.Record) error {
	if err := t.putJob(old, new, t.strs, &t.scratch); err != nil {
		return err
	}
	if old == nil {
		t.m.jobs++
	}
	t.m.counts.move(old, new)
	t.rebook(old, new)
	return nil
}

// remove deletes a record and releases what it booked.
func (t *tx) remove(old *job.Record) error {
	if err := t.deleteJob(old); err != nil {
		return err
	}
	t.m.jobs--
	t.m.counts.move(old, nil)
	t.rebook(old, nil)
	return nil
}

// transition is every durable change of a job: copy the published record,
// let change set fields, stamp rev+1 and update time, swap the copy in.
func (t *tx) transition(old *job.Record, change func(r *job.Record)) error {
	r := old.Clone()
	change(r)
	r.Rev = old.Rev + 1
	r.UpdateTimeMs = t.now
	t.recordTimeline(old, r)
	return t.put(old, r)
}

// ---- responses ----------------------------------------------------------------

func respOK() *journal.TApplyResponse { return &journal.TApplyResponse{Code: journal.TApplyCode_OK} }

func respID(id int64) *journal.TApplyResponse {
	return &journal.TApplyResponse{Code: journal.TApplyCode_OK, ID: thrift.Int64Ptr(id)}
}

func respFail(code journal.TApplyCode, format string, args ...any) *journal.TApplyResponse {
	return &journal.TApplyResponse{Code: code, Message: thrift.StringPtr(fmt.Sprintf(format, args...))}
}

func respItems(items []*journal.TItemResult_) *journal.TApplyResponse {
	if items == nil {
		items = []*journal.TItemResult_{}
	}
	return &journal.TApplyResponse{Code: journal.TApplyCode_OK, Items: items}
}

func itemOK(id int64) *journal.TItemResult_ {
	return &journal.TItemResult_{JobID: id, Code: journal.TApplyCode_OK}
}

func itemFail(id int64, code journal.TApplyCode, format string, args ...any) *journal.TItemResult_ {
	return &journal.TItemResult_{JobID: id, Code: code, Message: thrift.StringPtr(fmt.Sprintf(format, args...))}
}
