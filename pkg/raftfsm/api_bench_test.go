package raftfsm_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/httpapi"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// The HTTP API's jobs page over the DESIGN-scale fixture (1,000,000
// retained jobs unless LANCEMASTER_BENCH_JOBS says otherwise), server side:
// the request is served in process (httptest recorder), from the admin
// layer's read through the JSON encoding of 100 job views. Each case
// reports its p50 and p99 (make bench, fsm section; target p99 <= 5 ms).
func BenchmarkAPIJobsPage(b *testing.B) {
	fsm := raftfsm.BenchFixture(b)
	clock := func() time.Time { return time.UnixMilli(1_800_000_000_000) }
	adm := admin.New(admin.Deps{Proposer: &raftfsmtest.Proposer{FSM: fsm}, Reader: fsm, Cluster: benchCluster{},
		Backends: rpc.NewThriftBackendClient(rpc.DefaultConfig()), Credentials: config.StaticCredentials{},
		Clock: clock, NodeID: "m1"})
	api := httpapi.New(httpapi.Deps{Admin: adm, Reader: fsm, Raft: benchRaft{}, NodeID: "m1", Clock: clock,
		Access: httpapi.Access{Plaintext: true}})
	for _, c := range []struct{ name, query string }{
		{"Newest", "limit=100"},
		{"OldestFirst", "limit=100&reverse=true"},
		{"Catalog", "limit=100&catalog=c3"},
		{"StateCommitted", "limit=100&state=COMMITTED"},
		{"StateUnknownDeep", "limit=100&state=UNKNOWN&cursor=500000"},
		{"Pending", "limit=100&state=PENDING"},
		// One table in 1,000: the walk has no index for it and reads about
		// 100,000 records to fill a page.
		{"TableSparse", "limit=100&db=db&table=t7"},
	} {
		b.Run(c.name, func(b *testing.B) {
			lats := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest(http.MethodGet, "/v1/jobs?"+c.query, nil)
				req.RemoteAddr = "127.0.0.1:40000"
				rec := httptest.NewRecorder()
				t := time.Now()
				api.ServeHTTP(rec, req)
				lats = append(lats, time.Since(t))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", c.query, rec.Code, rec.Body.String())
				}
				if i == 0 {
					var page struct{ Jobs []json.RawMessage }
					if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || len(page.Jobs) != 100 {
						b.Fatalf("%s: %d jobs (%v), want a full page of 100", c.query, len(page.Jobs), err)
					}
				}
			}
			slices.Sort(lats)
			ms := func(p float64) float64 { return float64(lats[int(float64(len(lats)-1)*p)].Microseconds()) / 1000 }
			b.ReportMetric(ms(0.50), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
		})
	}
}

// benchCluster answers the reads a single leader answers; nothing here
// writes.
type benchCluster struct{ admin.Cluster }

func (benchCluster) Leader() (string, string)             { return "m1", "127.0.0.1:1" }
func (benchCluster) ConsistentRead(context.Context) error { return nil }

type benchRaft struct{}

func (benchRaft) IsLeader() bool           { return true }
func (benchRaft) Leader() (string, string) { return "m1", "127.0.0.1:1" }
func (benchRaft) LastContact() time.Time   { return time.Time{} }
