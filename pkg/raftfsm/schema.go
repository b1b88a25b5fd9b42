package raftfsm

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// memdb tables and indexes. Every secondary index of the jobs table holds
// only the rows a leader service asks for (AllowMissing), keyed so that the
// query is one seek plus a walk over its matches: the dispatcher's queries
// cost O(log n + matches) however many retained jobs there are.
const (
	tableJobs     = "jobs"
	tableCatalogs = "catalogs"
	tableBackends = "backends"

	indexID             = "id"              // every table: the primary key, ascending
	indexCatalog        = "catalog"         // jobs: (catalog_id, job_id), all jobs
	indexPending        = "pending"         // jobs: job_id of PENDING jobs
	indexRunning        = "running"         // jobs: (deadline, job_id) of RUNNING jobs
	indexSlot           = "slot"            // jobs: (backend_id, job_id) of slot holders
	indexRefreshDue     = "refresh_due"     // jobs: job_id of NeedsRefresh jobs
	indexRefreshRunning = "refresh_running" // jobs: job_id of refresh RUNNING jobs
	indexGC             = "gc"              // jobs: (update_time, job_id) of resolved, slot-free jobs
	indexName           = "name"            // catalogs: lower(name), unique
	indexAddress        = "address"         // backends: lower(address), unique
)

func newSchema() *memdb.DBSchema {
	jobIndex := func(name string, key func(r *job.Record) ([]byte, bool)) *memdb.IndexSchema {
		return &memdb.IndexSchema{
			Name:         name,
			Unique:       true, // every key ends with the job id, so memdb need not append it
			AllowMissing: name != indexID && name != indexCatalog,
			Indexer:      keyIndexer(func(o any) ([]byte, bool) { return key(o.(*job.Record)) }),
		}
	}
	indexes := func(list ...*memdb.IndexSchema) map[string]*memdb.IndexSchema {
		m := make(map[string]*memdb.IndexSchema, len(list))
		for _, ix := range list {
			m[ix.Name] = ix
		}
		return m
	}
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableJobs: {Name: tableJobs, Indexes: indexes(
			jobIndex(indexID, func(r *job.Record) ([]byte, bool) { return key64(r.JobID), true }),
			jobIndex(indexCatalog, func(r *job.Record) ([]byte, bool) { return key64(r.CatalogID, r.JobID), true }),
			jobIndex(indexPending, func(r *job.Record) ([]byte, bool) {
				return keyIf(r.MutationState == job.Pending, r.JobID)
			}),
			jobIndex(indexRunning, func(r *job.Record) ([]byte, bool) {
				return keyIf(r.MutationState == job.Running, r.DeadlineMs, r.JobID)
			}),
			jobIndex(indexSlot, func(r *job.Record) ([]byte, bool) {
				return keyIf(r.HoldsPossibleLiveSlot(), r.BackendID, r.JobID)
			}),
			jobIndex(indexRefreshDue, func(r *job.Record) ([]byte, bool) {
				return keyIf(r.NeedsRefresh(), r.JobID)
			}),
			jobIndex(indexRefreshRunning, func(r *job.Record) ([]byte, bool) {
				return keyIf(r.RefreshState == job.RefreshRunning, r.JobID)
			}),
			jobIndex(indexGC, func(r *job.Record) ([]byte, bool) {
				return keyIf(gcEligible(r), r.UpdateTimeMs, r.JobID)
			}),
		)},
		tableCatalogs: {Name: tableCatalogs, Indexes: indexes(
			&memdb.IndexSchema{Name: indexID, Unique: true,
				Indexer: keyIndexer(func(o any) ([]byte, bool) { return key64(o.(*Catalog).ID), true })},
			&memdb.IndexSchema{Name: indexName, Unique: true,
				Indexer: keyIndexer(func(o any) ([]byte, bool) { return keyFold(o.(*Catalog).Name), true })},
		)},
		tableBackends: {Name: tableBackends, Indexes: indexes(
			&memdb.IndexSchema{Name: indexID, Unique: true,
				Indexer: keyIndexer(func(o any) ([]byte, bool) { return key64(o.(*Backend).ID), true })},
			&memdb.IndexSchema{Name: indexAddress, Unique: true,
				Indexer: keyIndexer(func(o any) ([]byte, bool) { return keyFold(o.(*Backend).Address), true })},
		)},
	}}
}

// gcEligible: retention may remove a record only when it is resolved and
// holds no slot (DESIGN.md §9); the cutoff is the caller's.
func gcEligible(r *job.Record) bool { return !r.Unresolved() && !r.HoldsPossibleLiveSlot() }

// keyIndexer adapts a key function to memdb. Query arguments are encoded the
// same way (int64 → key64, string → keyFold), and fewer arguments than key
// parts make a prefix: memdb's Get seeks by prefix and LowerBound by order.
type keyIndexer func(obj any) ([]byte, bool)

func (k keyIndexer) FromObject(raw any) (bool, []byte, error) {
	key, ok := k(raw)
	if !ok {
		// memdb compares the old and new keys of an update before it looks
		// at ok: a key returned with ok=false would keep a stale entry.
		return false, nil, nil
	}
	return true, key, nil
}

func (k keyIndexer) FromArgs(args ...any) ([]byte, error) {
	var out []byte
	for _, a := range args {
		switch v := a.(type) {
		case int64:
			out = appendKey64(out, v)
		case string:
			out = append(out, keyFold(v)...)
		default:
			return nil, fmt.Errorf("raftfsm: index argument of type %T", a)
		}
	}
	return out, nil
}

func (k keyIndexer) PrefixFromArgs(args ...any) ([]byte, error) { return k.FromArgs(args...) }

// keyIf is the key of a row that belongs in a sparse index, or no key.
// (Most rows belong in none, so the key is not even built for them.)
func keyIf(in bool, vs ...int64) ([]byte, bool) {
	if !in {
		return nil, false
	}
	return key64(vs...), true
}

// key64 encodes int64s so that byte order is numeric order (sign bit
// flipped, big-endian), which is what makes index walks ordered.
func key64(vs ...int64) []byte {
	out := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		out = appendKey64(out, v)
	}
	return out
}

func appendKey64(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v)^(1<<63))
}

// keyFold is a case-insensitive string key, terminated so that a prefix
// seek for "abc" does not find "abcd".
func keyFold(s string) []byte {
	return append([]byte(strings.ToLower(s)), 0)
}
