package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/console"
)

// canary is planted in the fixture answers as secret-looking fields the
// console does not know (an invocation secret, a credential's content);
// it must never reach the page.
const canary = "SECRET-CANARY-5c1e0a93"

// xssName is an index name that would run script if a page used innerHTML.
const xssName = `<img src=x onerror="window.__pwned=1">`

const fixturePage = 6

// fixtureNow is the fixture's "now" (its times are minutes before it, so
// the pages say "12 min ago" rather than a date).
var fixtureNow = time.Now().UnixMilli()

// fixtureAPI answers the /v1 endpoints with fixed data shaped as the
// contract says (the adminapi structs, marshalled by encoding/json), and
// records the queries the console sends.
type fixtureAPI struct {
	t    *testing.T
	jobs []*adminapi.TJobView // newest first

	mu       sync.Mutex
	requests map[string][]url.Values
}

var follower = map[string]any{"node_id": "m2", "is_leader": false, "known_leader": true, "leader_id": "m1", "last_contact_ms": 12}

func job(id int64, state, refresh, catalog, table, index, mutation, typ string, unresolved bool) *adminapi.TJobView {
	v := &adminapi.TJobView{JobID: id, MutationState: &state, RefreshState: &refresh, Catalog: &catalog,
		Db: thrift.StringPtr("sales"), Table: &table, IndexName: &index, MutationType: &mutation,
		Creator: thrift.StringPtr("alice"), CreateTimeMs: thrift.Int64Ptr(fixtureNow - (10-id)*7*60000),
		UpdateTimeMs: thrift.Int64Ptr(fixtureNow - (10-id)*6*60000), Rev: thrift.Int64Ptr(id)}
	if typ != "" {
		v.IndexType = &typ
		v.Column = thrift.StringPtr("id")
	}
	if unresolved {
		v.Unresolved = thrift.BoolPtr(true)
	}
	return v
}

func newFixtureAPI(t *testing.T) *fixtureAPI {
	jobs := []*adminapi.TJobView{
		job(9, "PENDING", "NOT_REQUIRED", "lake", "items", "emb_idx", "CREATE", "IVF_PQ", true),
		job(8, "RUNNING", "NOT_REQUIRED", "lake", "items", "id_idx", "REPLACE", "BTREE", true),
		job(7, "RESOLVING", "NOT_REQUIRED", "lake", "orders", "ts_idx", "CREATE", "BTREE", true),
		job(6, "UNKNOWN", "NOT_REQUIRED", "lake", "orders", "ord_idx", "CREATE", "BITMAP", true),
		job(5, "UNKNOWN", "NOT_REQUIRED", "docs", "pages", "body_fts", "CREATE", "FTS", false),
		job(4, "COMMITTED", "FAILED", "docs", "pages", "title_idx", "CREATE", "BTREE", true),
		job(3, "COMMITTED", "DONE", "lake", "items", "vec_idx", "CREATE", "IVF_PQ", false),
		job(2, "NOT_COMMITTED", "REQUIRED", "lake", "items", "old_idx", "DROP", "", true),
		job(1, "CANCELLED", "NOT_REQUIRED", "lake", "items", xssName, "CREATE", "BTREE", false),
	}
	for _, j := range jobs {
		if st := j.GetMutationState(); st != "PENDING" && st != "CANCELLED" {
			j.BackendID, j.DispatchAttempts = thrift.Int64Ptr(1+j.JobID%2), thrift.Int32Ptr(1)
		}
	}
	jobs[1].BuildPhase, jobs[1].HoldsSlot = thrift.StringPtr("training"), thrift.BoolPtr(true)
	jobs[4].ForceReleased, jobs[4].ForceActor = thrift.BoolPtr(true), thrift.StringPtr("ops")
	j3 := jobs[6]
	j3.BackendID, j3.ProcessEpoch, j3.DispatchRevision = thrift.Int64Ptr(1), thrift.Int64Ptr(1764633000123), thrift.Int64Ptr(2)
	j3.InvocationID, j3.LeaderTerm, j3.DispatchAttempts = thrift.StringPtr("inv-3-7d2f"), thrift.Int64Ptr(4), thrift.Int32Ptr(1)
	j3.ResultCode, j3.TerminationProof = thrift.StringPtr("NATIVE_OK"), thrift.StringPtr("CHILD_REAPED")
	j3.CompletionReason, j3.WallMs, j3.PeakMemoryBytes = thrift.StringPtr("NONE"), thrift.Int64Ptr(8400), thrift.Int64Ptr(734003200)
	j3.PeakMemorySource, j3.BuildPhase = thrift.StringPtr("cgroup"), thrift.StringPtr("done")
	return &fixtureAPI{t: t, jobs: jobs, requests: map[string][]url.Values{}}
}

// fixtureEvents is the audit trail, newest first.
var fixtureEvents = []*adminapi.TAuditEvent{
	{Seq: 4, Index: 40, TimeMs: fixtureNow - 60000, Kind: "backend.drain", Subject: "2 (127.0.0.1:7402)", Actor: thrift.StringPtr("ops"), Verified: thrift.BoolPtr(true)},
	{Seq: 3, Index: 31, TimeMs: fixtureNow - 600000, Kind: "option.set", Subject: "lance_index_job_dispatcher_paused", Actor: thrift.StringPtr("ops"), Summary: thrift.StringPtr("false -> true")},
	{Seq: 2, Index: 5, TimeMs: fixtureNow - 3600000, Kind: "backend.add", Subject: "1 (127.0.0.1:7401)", Actor: thrift.StringPtr("alice")},
	{Seq: 1, Index: 3, TimeMs: fixtureNow - 3700000, Kind: "catalog.create", Subject: "lake", Actor: thrift.StringPtr("alice"), Claimed: thrift.StringPtr("al")},
}

// log3 is job 3's log tail; one line would be markup if a page used innerHTML.
const log3 = "training IVF_PQ: 256 partitions\n<b>writing</b> 16 sub-vectors\ncommitted version 7\n"

// t0 is job 3's admission.
var t0 = fixtureNow - 7*7*60000

// timeline3 is job 3's timeline, in journal order.
var timeline3 = []map[string]any{
	{"kind": "ADMITTED", "time_ms": t0 + 0, "index": 10, "actor": "alice"},
	{"kind": "DISPATCHED", "time_ms": t0 + 400, "index": 12, "detail": "backend 1, attempt 1"},
	{"kind": "ACCEPTED", "time_ms": t0 + 1000, "index": 13, "detail": "index uuid 0c9e"},
	{"kind": "PHASE", "time_ms": t0 + 2000, "index": 15, "detail": "training"},
	{"kind": "PHASE", "time_ms": t0 + 6000, "index": 17, "detail": "writing"},
	{"kind": "REPORTED", "time_ms": t0 + 8400, "index": 18, "detail": "NATIVE_OK", "secret": canary},
	{"kind": "SLOT_RELEASED", "time_ms": t0 + 8400, "index": 18, "detail": "CHILD_REAPED"},
	{"kind": "REFRESH_RUNNING", "time_ms": t0 + 8600, "index": 19},
	{"kind": "REFRESH_DONE", "time_ms": t0 + 9000, "index": 20},
	{"kind": "DONE", "time_ms": t0 + 9000, "index": 20},
}

// with marshals v and adds fields to it.
func with(t *testing.T, v any, extra map[string]any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, x := range extra {
		m[k] = x
	}
	return m
}

func (f *fixtureAPI) queries(path string) []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests[path])
}

func (f *fixtureAPI) count(path string) int { return len(f.queries(path)) }

func (f *fixtureAPI) lastQuery(path string) url.Values {
	q := f.queries(path)
	if len(q) == 0 {
		f.t.Fatalf("the console never asked %s", path)
	}
	return q[len(q)-1]
}

// match is the fixture's version of the jobs list filters.
func match(j *adminapi.TJobView, q url.Values) bool {
	if s := q.Get("state"); s != "" {
		ok := false
		for _, st := range strings.Split(s, ",") {
			ok = ok || st == j.GetMutationState() || st == "refresh:"+j.GetRefreshState()
		}
		if !ok {
			return false
		}
	}
	for k, v := range map[string]string{"catalog": j.GetCatalog(), "db": j.GetDb(), "table": j.GetTable(),
		"mutation_type": j.GetMutationType(), "index_type": j.GetIndexType()} {
		if w := q.Get(k); w != "" && w != v {
			return false
		}
	}
	return q.Get("unresolved") != "true" || j.GetUnresolved()
}

// page answers the jobs matching q, fixturePage at a time; the cursor is
// "after-ID".
func (f *fixtureAPI) page(q url.Values) ([]*adminapi.TJobView, string) {
	var before int64 = 1 << 62
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(c, "before-"), 10, 64)
		if err != nil {
			f.t.Errorf("the console sent a cursor the API never gave: %q", c)
		}
		before = n
	}
	var out []*adminapi.TJobView
	for _, j := range f.jobs {
		if j.JobID < before && match(j, q) {
			out = append(out, j)
		}
	}
	if len(out) > fixturePage {
		return out[:fixturePage], "before-" + strconv.FormatInt(out[fixturePage-1].JobID, 10)
	}
	return out, ""
}

func (f *fixtureAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests[r.URL.Path] = append(f.requests[r.URL.Path], r.URL.Query())
	f.mu.Unlock()
	q := r.URL.Query()
	body := map[string]any{"answered_by": follower}
	status := http.StatusOK
	switch p := r.URL.Path; {
	case p == "/v1/jobs":
		jobs, next := f.page(q)
		var out []any
		for _, j := range jobs {
			out = append(out, with(f.t, j, map[string]any{"invocation_secret": canary}))
		}
		body["jobs"] = out
		if next != "" {
			body["next_cursor"] = next
		}
	case strings.HasPrefix(p, "/v1/jobs/") && strings.HasSuffix(p, "/logs"):
		if p != "/v1/jobs/3/logs" {
			body["logs"] = map[string]any{"log": "", "source": "none"}
			break
		}
		body["logs"] = map[string]any{"log": log3, "source": "backend", "phase": "done", "secret": canary}
	case strings.HasPrefix(p, "/v1/jobs/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(p, "/v1/jobs/"), 10, 64)
		i := slices.IndexFunc(f.jobs, func(j *adminapi.TJobView) bool { return j.JobID == id })
		if i < 0 {
			status = http.StatusNotFound
			body["error"] = map[string]any{"code": "NOT_FOUND", "message": "no job " + strconv.FormatInt(id, 10)}
			break
		}
		body["job"] = with(f.t, f.jobs[i], map[string]any{"invocation_secret": canary})
		tl := []map[string]any{}
		if id == 3 {
			tl = timeline3
		}
		body["timeline"] = tl
	case p == "/v1/catalogs":
		body["catalogs"] = []any{
			with(f.t, &adminapi.TCatalog{Name: "lake", RootURI: thrift.StringPtr("s3://bucket/lake"), CredentialsRef: thrift.StringPtr("lake-s3")},
				map[string]any{"credentials": map[string]string{"aws_secret_access_key": canary}}),
			with(f.t, &adminapi.TCatalog{Name: "docs", RootURI: thrift.StringPtr("/data/docs")}, nil),
		}
	case p == "/v1/backends" || strings.HasPrefix(p, "/v1/backends/"):
		inv := with(f.t, &adminapi.TBackendInvocation{JobID: 8, MutationState: thrift.StringPtr("RUNNING"), InvocationID: thrift.StringPtr("inv-8"),
			BuildPhase: thrift.StringPtr("training")}, map[string]any{"invocation_secret": canary})
		backends := []any{
			with(f.t, &adminapi.TBackend{BackendID: 1, Address: "127.0.0.1:7401", Alive: thrift.BoolPtr(true), Accepting: thrift.BoolPtr(true),
				HeldSlots: thrift.Int32Ptr(1), Capacity: thrift.Int32Ptr(4), ProcessEpoch: thrift.Int64Ptr(1764633000123),
				Version: thrift.StringPtr("v0.9.0"), LastHeardMs: thrift.Int64Ptr(fixtureNow - 900)}, map[string]any{"invocations": []any{inv}}),
			&adminapi.TBackend{BackendID: 2, Address: "127.0.0.1:7402", Alive: thrift.BoolPtr(false), Drained: thrift.BoolPtr(true), Accepting: thrift.BoolPtr(false),
				DrainActor: thrift.StringPtr("ops"), HeldSlots: thrift.Int32Ptr(0), Capacity: thrift.Int32Ptr(2), Warning: thrift.StringPtr("no heartbeat answer for 40s")},
		}
		if p != "/v1/backends" { // backends show: one, with its slots, capacity and invocations
			id, _ := strconv.Atoi(strings.TrimPrefix(p, "/v1/backends/"))
			body["backend"] = backends[id-1]
			break
		}
		// The list: what the registry and the heartbeats say (as backends
		// list), from a master that lost its leader.
		for i, b := range backends {
			m := with(f.t, b, nil)
			for _, k := range []string{"accepting", "capacity", "invocations", "dispatchable"} {
				delete(m, k)
			}
			backends[i] = m
		}
		body["backends"] = backends
		body["answered_by"] = map[string]any{"node_id": "m3", "is_leader": false, "known_leader": false, "last_contact_ms": 41000}
		body["stale_warning"] = "m3 has not heard from a leader for 41s: this answer may be stale"
	case p == "/v1/events":
		var out []any
		for _, e := range fixtureEvents {
			if k := q.Get("kind"); k != "" && e.Kind != k && !(strings.HasSuffix(k, ".") && strings.HasPrefix(e.Kind, k)) {
				continue
			}
			out = append(out, with(f.t, e, map[string]any{"credentials": canary}))
		}
		body["events"] = out
	case p == "/v1/options":
		body["options"] = []*adminapi.TOption{
			{Key: "enable_lance_index_mutation", Value: "true", DefaultValue: "true", IsDefault: true, Description: thrift.StringPtr("the admission kill switch")},
			{Key: "lance_index_job_dispatcher_paused", Value: "true", DefaultValue: "false", IsDefault: false, Description: thrift.StringPtr("no new dispatches")},
		}
	case p == "/v1/members":
		body["members"] = &adminapi.TRaftPeersResponse{LeaderID: thrift.StringPtr("m1"), Term: thrift.Int64Ptr(4), CommitIndex: thrift.Int64Ptr(120),
			Peers: []*adminapi.TRaftPeer{
				{ID: "m1", RaftAddress: "127.0.0.1:7101", RPCAddress: thrift.StringPtr("127.0.0.1:7201"), Suffrage: thrift.StringPtr("Voter"), IsLeader: thrift.BoolPtr(true), Health: thrift.StringPtr("healthy"), LastContactMs: thrift.Int64Ptr(fixtureNow - 20)},
				{ID: "m2", RaftAddress: "127.0.0.1:7102", RPCAddress: thrift.StringPtr("127.0.0.1:7202"), Suffrage: thrift.StringPtr("Voter"), Health: thrift.StringPtr("healthy"), LastContactMs: thrift.Int64Ptr(fixtureNow - 12)},
				{ID: "m3", RaftAddress: "127.0.0.1:7103", RPCAddress: thrift.StringPtr("127.0.0.1:7203"), Suffrage: thrift.StringPtr("Voter"), Health: thrift.StringPtr("unhealthy"), LastContactMs: thrift.Int64Ptr(fixtureNow - 41000)},
			}}
	case p == "/v1/health":
		st := func(id, state string, applied int64) *adminapi.TRaftMemberStatus {
			return &adminapi.TRaftMemberStatus{NodeID: id, State: &state, Term: thrift.Int64Ptr(4), LeaderID: thrift.StringPtr("m1"),
				AppliedIndex: &applied, Version: thrift.StringPtr("v0.9.0")}
		}
		body["health"] = &adminapi.TRaftHealthResponse{LeaderID: thrift.StringPtr("m1"), Voters: thrift.Int32Ptr(3), Quorum: thrift.Int32Ptr(2),
			HealthyVoters: thrift.Int32Ptr(2), FailureTolerance: thrift.Int32Ptr(0), Healthy: thrift.BoolPtr(true), MaxLag: thrift.Int64Ptr(9),
			Members: []*adminapi.TRaftMemberHealth{
				{ID: "m1", Reachable: true, IsLeader: thrift.BoolPtr(true), Healthy: thrift.BoolPtr(true), Lag: thrift.Int64Ptr(0), Status: st("m1", "Leader", 120)},
				{ID: "m2", Reachable: true, Healthy: thrift.BoolPtr(true), Lag: thrift.Int64Ptr(1), Status: st("m2", "Follower", 119)},
				{ID: "m3", Reachable: false, Error: thrift.StringPtr("connection refused")},
			}}
	default:
		status = http.StatusNotFound
		body["error"] = map[string]any{"code": "NOT_FOUND", "message": "no such endpoint " + p}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(body); err != nil {
		f.t.Error(err)
	}
}

// fixtureServer serves the console and the fixture API on one loopback
// origin, as a master does.
func fixtureServer(f *fixtureAPI) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui/", console.Handler())
	mux.Handle("/v1/", f)
	return mux
}
