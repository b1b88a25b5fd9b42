// Package raftfsm is the journal: the replicated FSM that holds every job
// record, catalog, backend and cluster-wide option (DESIGN.md §2–§4, §9, §11).
//
// A log entry is one command: a type byte (bit 7 set = ignorable by a master
// that does not know the type) followed by the Thrift compact encoding of the
// command's struct from idl/journal.thrift (Encode). Each command family
// registers its command types in its own file, each once with its spec
// (commands.go: name, forward rule, wake rule) and its apply function:
// admit.go (M0), dispatch.go (M1, M2/M2', P, and the reports' P-then-M2
// batch), refresh.go (R1–R4), operator.go (cancel, force-release), gc.go,
// catalog.go, backend.go (add, remove, drain), option.go, member.go (the
// address book), clusterid.go and audit.go (an audit event of a change made
// outside the FSM). State.Preview runs the same registered function on a
// dropped transaction.
//
// Apply is pure: it reads no clock and no random source. The leader stamps
// time, ids, secrets and its term into the command before proposing it.
// Guard failures are Apply responses (*journal.TApplyResponse with a code
// other than OK), not errors; an entry that cannot be applied at all goes to
// FSM.OnFatal. Every transition copies the record, changes the copy, bumps
// rev and update time and swaps it in: a published record is never mutated.
//
// State lives in persistent copy-on-write B+trees of shared pointers
// (package ordtree, schema.go): each entry copies the nodes it changes and
// publishes a new immutable State in O(changes), leaving every earlier view
// intact; a failed or fatal entry drops its copies and changes nothing. Jobs
// are ordered by id, by catalog and by GC age, and secondary indexes hold
// only the rows each leader-service query asks for, so those queries cost
// O(log n + matches). The fence, quota and slot books are maintained by one
// function, book(old, new), on apply and rebuilt by it on restore
// (books.go); the FSM keeps them in persistent radix trees for the same
// reason.
//
// Memory: a job that is resolved, slot-free and in no leader-service index
// (nearly every job of a large journal) is kept packed (row.go,
// jobcodec.Packed): a 96-byte row with its id, update time, states,
// catalog, db and table, a pointer to its admitted definition, shared with
// every job that repeats it, and its other set fields in one varint string;
// ~290 bytes a job with ~8 bytes in each of three orderings. A read unpacks
// a private copy; a filtered walk reads the row's own fields and unpacks
// only what it returns. Live jobs keep their whole record. Strings that jobs
// repeat (creator, target, index names, definition, result messages) are
// shared: by an interner on restore and by a bounded pool on apply (package
// jobcodec, the record codec: journal form, direct decoder, packed form,
// interning).
//
// Concurrency: raft's FSM goroutine calls Apply, Snapshot and Restore, never
// concurrently. FSMSnapshot.Persist runs concurrently with Apply on an
// immutable view. FSM.State may be called from any goroutine; the *State it
// returns never changes.
//
// Snapshots (snapshot.go) are a deterministic stream of compact frames, so
// replicas that applied the same log write identical bytes; Restore decodes
// job records with a direct decoder (jobcodec.Reader) for speed.
//
// Invocation secrets are journaled and snapshotted (reports are
// authenticated against them) but never appear in a log line or a message.
package raftfsm
