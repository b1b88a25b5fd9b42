package raftfsm

import (
	"cmp"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/lancemaster/lancemaster/pkg/raftfsm/ordtree"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// The audit trail: who changed what, and when. Every admin change that is an
// FSM command (catalogs, backends, options, cancel, force-release) carries
// the caller (TAuditActor) and records its event in the same Apply as the
// change, so the change and its event are one journal entry. Changes that
// are not FSM commands (raft membership, snapshot restore) are journaled by
// the leader afterwards as a CmdAudit entry (this file's command).
//
// An event is recorded only when the change happened (OK, not NOOP or a
// failed guard) and only when the command carries an actor: entries written
// by an older leader carry none, and every replica then records nothing for
// them, whatever it replays from. Events live in their own table, by seq
// (allocated here, never reused: a restored file's events keep theirs and
// the next one goes above them), at most audit_retention_count of them: the
// entry that records one more removes the oldest, deterministically. The
// last change of each option (who, when) is kept apart from the events, so
// trimming them never loses it. Both are in snapshots.

func init() {
	register(CommandSpec{Type: CmdAudit, Name: "audit", Forward: ForwardFromFollower, Wake: WakeNever}, journal.NewTAuditCommand, applyAudit)
}

// Bounds of what an event holds.
const (
	maxAuditKindBytes    = 64
	maxAuditSummaryBytes = 1024
)

// Event kinds.
const (
	AuditCatalogCreate  = "catalog.create"
	AuditCatalogUpdate  = "catalog.update"
	AuditCatalogRemove  = "catalog.remove"
	AuditBackendAdd     = "backend.add"
	AuditBackendRemove  = "backend.remove"
	AuditBackendDrain   = "backend.drain"
	AuditBackendUndrain = "backend.undrain"
	AuditOptionSet      = "option.set"
	AuditJobCancel      = "job.cancel"
	AuditJobForce       = "job.force-release"
	// Journaled by CmdAudit after the change itself.
	AuditRaftAddVoter       = "raft.add-voter"
	AuditRaftAddNonvoter    = "raft.add-nonvoter"
	AuditRaftPromote        = "raft.promote"
	AuditRaftRemovePeer     = "raft.remove-peer"
	AuditRaftTransferLeader = "raft.transfer-leader"
	AuditSnapshotRestore    = "snapshot.restore"
)

// AuditKinds lists every kind, FSM-recorded ones first (completion, docs).
var AuditKinds = []string{
	AuditCatalogCreate, AuditCatalogUpdate, AuditCatalogRemove,
	AuditBackendAdd, AuditBackendRemove, AuditBackendDrain, AuditBackendUndrain,
	AuditOptionSet, AuditJobCancel, AuditJobForce,
	AuditRaftAddVoter, AuditRaftAddNonvoter, AuditRaftPromote, AuditRaftRemovePeer, AuditRaftTransferLeader,
	AuditSnapshotRestore,
}

// Actor is who made a change: Name is the verified caller (a certificate
// identity, Verified) or else the name the client claimed; Claimed is the
// claim when it says something else.
type Actor struct {
	Name     string
	Claimed  string
	Verified bool
}

// AuditEvent is one audited change.
type AuditEvent struct {
	Seq     int64  // allocated in order; the list cursor
	Index   uint64 // the journal index of the entry that recorded it
	TimeMs  int64  // master clock, from the command
	Kind    string // one of AuditKinds
	Subject string // catalog name, backend, option key, job, member id
	Actor   Actor
	Summary string // what changed: "field: old → new", ...
}

// OptionChange is who set an option last, and when.
type OptionChange struct {
	Actor  Actor
	TimeMs int64
}

// auditBook is the audit part of meta; like the rest of meta it is never
// changed once published (a transaction replaces the tree and the map).
type auditBook struct {
	events  ordtree.Tree[*AuditEvent] // by seq
	lastSeq int64
	options map[string]OptionChange // option key -> its last change
}

func cmpAuditSeq(a, b *AuditEvent) int { return cmp.Compare(a.Seq, b.Seq) }

// applyAudit records a change made outside the FSM (membership, restore).
func applyAudit(t *tx, c *journal.TAuditCommand) (*journal.TApplyResponse, error) {
	if c.Kind == "" || len(c.Kind) > maxAuditKindBytes || strings.IndexFunc(c.Kind, notKindRune) >= 0 {
		return respFail(journal.TApplyCode_INVALID, "an audit kind is 1 to %d lower-case letters, '.' or '-'", maxAuditKindBytes), nil
	}
	if err := job.ValidateActor("audit subject", c.Subject); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
	}
	if err := job.CheckBytes("audit summary", c.GetSummary(), maxAuditSummaryBytes); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
	}
	if resp := checkAuditActor(c.Actor); resp != nil {
		return resp, nil
	}
	a := c.Actor
	if a == nil {
		a = &journal.TAuditActor{}
	}
	t.audit(a, c.Kind, c.Subject, c.GetSummary())
	return respOK(), nil
}

func notKindRune(r rune) bool { return (r < 'a' || r > 'z') && r != '.' && r != '-' }

// checkAuditActor refuses an actor no replica should store; nil: fine (an
// absent actor is fine too).
func checkAuditActor(a *journal.TAuditActor) *journal.TApplyResponse {
	if a == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{{"actor", a.Actor}, {"claimed actor", a.GetClaimed()}} {
		if err := job.ValidateActor(f.name, f.v); err != nil {
			return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err))
		}
	}
	return nil
}

// audit records an event in this entry when the command carries an actor
// (a nil one: an older leader's entry, nothing is recorded), and trims the
// table to the retention in force after this entry's own changes.
func (t *tx) audit(a *journal.TAuditActor, kind, subject, summary string) {
	if a == nil {
		return
	}
	t.m.audit.lastSeq++
	e := &AuditEvent{
		Seq: t.m.audit.lastSeq, Index: t.index, TimeMs: t.now, Kind: kind,
		Subject: clipUTF8(subject, job.MaxNameBytes), Actor: actorFromThrift(a), Summary: clipUTF8(summary, maxAuditSummaryBytes),
	}
	x := t.m.audit.events.Txn(ordtree.NewOwner(), cmpAuditSeq)
	x.Set(e)
	for keep := int(min(t.m.resolved.AuditRetentionCount, 1<<30)); x.Len() > keep; {
		var oldest *AuditEvent
		x.Version().Ascend(nil, func(e *AuditEvent) bool { oldest = e; return false })
		x.Delete(oldest)
	}
	t.m.audit.events = x.Version()
}

// noteOptionChange keeps who set key last (published maps are shared: copy).
func (t *tx) noteOptionChange(a *journal.TAuditActor, key string) {
	if a == nil {
		return
	}
	m := maps.Clone(t.m.audit.options)
	if m == nil {
		m = map[string]OptionChange{}
	}
	m[key] = OptionChange{Actor: actorFromThrift(a), TimeMs: t.now}
	t.m.audit.options = m
}

func actorFromThrift(a *journal.TAuditActor) Actor {
	return Actor{Name: a.Actor, Claimed: a.GetClaimed(), Verified: a.GetVerified()}
}

// ActorToThrift is the journal form of an actor.
func ActorToThrift(a Actor) *journal.TAuditActor {
	out := &journal.TAuditActor{Actor: a.Name}
	if a.Claimed != "" {
		out.Claimed = thrift.StringPtr(a.Claimed)
	}
	if a.Verified {
		out.Verified = thrift.BoolPtr(true)
	}
	return out
}

// clipUTF8 cuts s to at most n bytes on a rune boundary, marking the cut.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// ---- summaries --------------------------------------------------------------

// changes builds "field: old → new; ..." from (field, old, new) triples,
// leaving out the unchanged ones.
type changes []string

func (c *changes) add(field string, old, new any) {
	o, n := fmt.Sprint(old), fmt.Sprint(new)
	if o == n {
		return
	}
	*c = append(*c, field+": "+orDash(o)+" → "+orDash(n))
}

func (c changes) String() string { return strings.Join(c, "; ") }

func orDash(s string) string {
	if s == "" || s == "0" {
		return "-"
	}
	return s
}

// catalogChanges says what changed from old to new (old nil: created).
func catalogChanges(old, new *Catalog) string {
	if old == nil {
		old = &Catalog{}
	}
	var c changes
	c.add("provider", old.Provider, new.Provider)
	c.add("root_uri", old.RootURI, new.RootURI)
	c.add("credentials_ref", old.CredentialsRef, new.CredentialsRef)
	c.add("refresh_kind", old.RefreshKind, new.RefreshKind)
	c.add("refresh_url", old.RefreshURL, new.RefreshURL)
	c.add("refresh_address", old.RefreshAddress, new.RefreshAddress)
	c.add("refresh_statement", old.RefreshStatement, new.RefreshStatement)
	c.add("refresh_credentials_ref", old.RefreshCredentialsRef, new.RefreshCredentialsRef)
	c.add("optimize_unindexed_rows", old.OptimizeUnindexedRows, new.OptimizeUnindexedRows)
	c.add("optimize_min_interval_second", old.OptimizeMinIntervalSecond, new.OptimizeMinIntervalSecond)
	return c.String()
}

// BackendSubject names a backend in an event: id and address.
func BackendSubject(id int64, address string) string { return fmt.Sprintf("%d (%s)", id, address) }

// JobSubject names a job in an event.
func JobSubject(id int64) string { return fmt.Sprintf("job %d", id) }

// ---- reads ------------------------------------------------------------------

// AuditFilter selects events. A zero field matches anything.
type AuditFilter struct {
	Kind    string // exact, or a prefix ending in '.' ("backend.")
	Subject string // substring, case-insensitive
	Actor   string // the actor or the claimed name, case-insensitive
	SinceMs int64  // events at or after this time
}

func (f AuditFilter) match(e *AuditEvent) bool {
	return (f.Kind == "" || e.Kind == f.Kind || (strings.HasSuffix(f.Kind, ".") && strings.HasPrefix(e.Kind, f.Kind))) &&
		(f.Subject == "" || strings.Contains(fold(e.Subject), fold(f.Subject))) &&
		(f.Actor == "" || strings.EqualFold(e.Actor.Name, f.Actor) || strings.EqualFold(e.Actor.Claimed, f.Actor)) &&
		e.TimeMs >= f.SinceMs
}

// AuditEvents returns the events matching f with seq < beforeSeq (0: from
// the newest), newest first, at most limit, and whether more match.
func (s *State) AuditEvents(f AuditFilter, beforeSeq int64, limit int) (out []*AuditEvent, more bool) {
	descendAudit(s.m.audit.events, s.m.audit.lastSeq, beforeSeq, func(e *AuditEvent) bool {
		if !f.match(e) {
			return true
		}
		if limit > 0 && len(out) == limit {
			more = true
			return false
		}
		out = append(out, e)
		return true
	})
	return out, more
}

// AuditEventCount is how many events the table holds.
func (s *State) AuditEventCount() int { return s.m.audit.events.Len() }

// OptionChange returns who set an option last and when, if an audited
// command did.
func (s *State) OptionChange(key string) (OptionChange, bool) {
	c, ok := s.m.audit.options[key]
	return c, ok
}

// descendAudit walks the events with seq < before (every event when
// before <= 0) from the newest, until fn returns false. The ordered tree
// walks upwards only: it reads windows of auditWindow seqs downwards, so a
// page of the newest events reads a few hundred rows, not the table.
func descendAudit(t ordtree.Tree[*AuditEvent], lastSeq, before int64, fn func(*AuditEvent) bool) {
	var first int64
	t.Ascend(nil, func(e *AuditEvent) bool { first = e.Seq; return false })
	if t.Len() == 0 {
		return
	}
	hi := lastSeq + 1
	if before > 0 && before < hi {
		hi = before
	}
	for hi > first {
		lo := max(hi-auditWindow, first)
		var win []*AuditEvent
		t.Ascend(func(e *AuditEvent) int { return cmp.Compare(e.Seq, lo) }, func(e *AuditEvent) bool {
			if e.Seq >= hi {
				return false
			}
			win = append(win, e)
			return true
		})
		for i := len(win) - 1; i >= 0; i-- {
			if !fn(win[i]) {
				return
			}
		}
		hi = lo
	}
}

// auditWindow is how many seqs descendAudit reads at a time.
const auditWindow = 256

// ---- snapshot form ------------------------------------------------------------

// AuditEventToThrift is the journal form of an event.
func AuditEventToThrift(e *AuditEvent) *journal.TAuditEvent {
	out := &journal.TAuditEvent{Seq: e.Seq, Index: int64(e.Index), TimeMs: e.TimeMs, Kind: e.Kind, Subject: e.Subject,
		Actor: ActorToThrift(e.Actor)}
	if e.Summary != "" {
		out.Summary = thrift.StringPtr(e.Summary)
	}
	return out
}

func auditEventFromThrift(t *journal.TAuditEvent) *AuditEvent {
	e := &AuditEvent{Seq: t.Seq, Index: uint64(max(t.Index, 0)), TimeMs: t.TimeMs, Kind: t.Kind, Subject: t.Subject, Summary: t.GetSummary()}
	if t.Actor != nil {
		e.Actor = actorFromThrift(t.Actor)
	}
	return e
}

func decodeAuditEventBytes(b []byte) (*AuditEvent, error) {
	t := journal.NewTAuditEvent()
	if err := decodeCompact(b, t); err != nil {
		return nil, err
	}
	return auditEventFromThrift(t), nil
}

// writeAuditItems emits the events, by seq (after the jobs).
func (s *State) writeAuditItems(emit func(*journal.TSnapshotItem) bool) {
	s.m.audit.events.Ascend(nil, func(e *AuditEvent) bool {
		return emit(&journal.TSnapshotItem{AuditEvent: AuditEventToThrift(e)})
	})
}

// optionValueOf is an option's snapshot form, with its last change.
func optionValueOf(m *meta, key string) *journal.TOptionValue {
	o := &journal.TOptionValue{Key: key, Value: m.options[key]}
	if c, ok := m.audit.options[key]; ok {
		o.ChangedBy, o.ChangedTimeMs = ActorToThrift(c.Actor), thrift.Int64Ptr(c.TimeMs)
	}
	return o
}

// restoreOptionChange keeps a snapshot option's last change.
func restoreOptionChange(m *meta, o *journal.TOptionValue) {
	if o.ChangedBy == nil {
		return
	}
	if m.audit.options == nil {
		m.audit.options = map[string]OptionChange{}
	}
	m.audit.options[o.Key] = OptionChange{Actor: actorFromThrift(o.ChangedBy), TimeMs: o.GetChangedTimeMs()}
}

// loadAuditEvent checks a snapshot event's order and keeps it.
func (l *loader) loadAuditEvent(e *AuditEvent) error {
	if e.Seq <= l.lastAudit {
		return fmt.Errorf("%w: audit event %d out of order", ErrSnapshotFormat, e.Seq)
	}
	l.lastAudit = e.Seq
	l.audit = append(l.audit, e)
	return nil
}
