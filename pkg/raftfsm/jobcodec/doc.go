// Package jobcodec is the journal's codec of job records: the conversions
// between job.Record and its journal form (TJobRecord, idl/journal.thrift;
// RecordToThrift, RecordFromThrift, and Wire, a reusable holder for writing
// many records), the direct compact decoder a snapshot's restore reads job
// records with (Reader.JobRecord), the packed form the tables keep retained
// jobs in (Pack, Packed.Unpack: a third of a record's memory, the same
// record back), and the interning that lets records share the strings and
// definitions they repeat (Interner while a snapshot is read, StrPool for
// the records Apply creates).
//
// It is part of the storage engine under pkg/raftfsm, beside ordtree (the
// ordered indexes), and knows nothing of commands, state or books; it
// imports only pkg/job and the generated journal code. Its rules are the
// journal's: zero values are left unset on the wire; a missing or unknown
// mutation state reads as UNKNOWN, refresh state as REQUIRED and proof as
// NONE (fail-closed); a field of an unknown id or an unexpected type is
// skipped, as the generated reader skips it. jobFieldTypes must list every
// TJobRecord field (a test checks it against the generated struct).
package jobcodec
