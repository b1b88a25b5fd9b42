package master

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/metrics/metricstest"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// fakeRaft is a raftView with scripted facts.
type fakeRaft struct {
	stats  map[string]string
	leader string
}

func (f fakeRaft) Stats() map[string]string { return f.stats }
func (f fakeRaft) IsLeader() bool           { return false }
func (f fakeRaft) LeaderTerm() uint64       { return 0 }
func (f fakeRaft) Leader() (string, string) {
	if f.leader == "" {
		return "", ""
	}
	return f.leader, "127.0.0.1:1"
}

// fsmAt is a journal replica whose last applied entry has the given index.
func fsmAt(t *testing.T, index uint64) raftfsm.Reader {
	t.Helper()
	f := raftfsm.New(nil)
	if index == 0 {
		return f
	}
	data, err := raftfsm.Encode(raftfsm.CmdSetOption, &journal.TSetOptionCommand{Key: options.OptDispatcherPaused, Value: "false"})
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
	if f.State().AppliedIndex() != index {
		t.Fatalf("fsm applied %d", f.State().AppliedIndex())
	}
	return f
}

// /readyz judges the replica by its own applied index (raft's runs ahead
// of it), falls back to raft's when the replica has none, allows a small
// lag, and says why it fails.
func TestReadyzFSMLag(t *testing.T) {
	stats := func(commit, applied uint64) map[string]string {
		return map[string]string{"state": "Follower", "term": "3", "commit_index": strconv.FormatUint(commit, 10),
			"applied_index": strconv.FormatUint(applied, 10)}
	}
	for _, tc := range []struct {
		name     string
		raft     fakeRaft
		fsm      uint64
		ready    bool
		contains string
	}{
		{"caught up", fakeRaft{stats(500, 500), "m2"}, 500, true, "[+]fsm_caught_up ok: applied index 500, commit index 500"},
		{"small lag", fakeRaft{stats(500, 500), "m2"}, 480, true, "[+]fsm_caught_up ok: applied index 480"},
		{"fsm behind raft", fakeRaft{stats(500, 500), "m2"}, 400, false,
			"[-]fsm_caught_up failed: applied index 400 is 100 entries behind the commit index 500 (allowed 64)"},
		{"no fsm index: raft's", fakeRaft{stats(500, 10), "m2"}, 0, false, "applied index 10 is 490 entries behind"},
		{"no fsm index, raft caught up", fakeRaft{stats(500, 499), "m2"}, 0, true, "[+]leader ok: m2 at 127.0.0.1:1"},
		{"no leader", fakeRaft{stats(500, 500), ""}, 500, false, "[-]leader failed: no leader known (raft state Follower, term 3)"},
		{"no stats", fakeRaft{map[string]string{"state": "Shutdown"}, "m2"}, 0, false, "raft reports no commit index (state Shutdown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(metrics.Handler(metrics.Options{Gatherer: metrics.NewRegistry(),
				Ready: readyChecks(tc.raft, fsmAt(t, tc.fsm), DefaultReadyMaxApplyLag)}))
			defer srv.Close()
			code, body := metricstest.Get(t, srv.URL+"/readyz?verbose")
			if (code == 200) != tc.ready || !strings.Contains(body, tc.contains) {
				t.Fatalf("status %d, want ready=%v; body:\n%s", code, tc.ready, body)
			}
		})
	}
}
