package master_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// freePorts reserves n loopback ports for servers named before they bind.
func freePorts(t *testing.T, n int) []int { return testkit.Ports(t, n) }

func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, timeout, what, cond)
}

// Three masters over loopback with real raft-boltdb stores: 1,000 admissions
// sent to a follower; the leader is killed; the new leader has all 1,000 and
// accepts writes; the killed master, restarted from its data dir, catches up.
func TestFollowerAdmissionsSurviveLeaderLoss(t *testing.T) {
	c := mastertest.New(t, nil)
	f := c.Follower()
	c.Setup(f)
	c.Admit(f, "i", 1000)
	for i, m := range c.Masters {
		eventually(t, 10*time.Second, fmt.Sprintf("m%d applies 1000 jobs", i+1), func() bool { return mastertest.JobCount(m) == 1000 })
	}

	old := c.Leader()
	c.Kill(old)
	l := c.Leader()
	if l == old {
		t.Fatal("the killed master is still the leader")
	}
	if n := mastertest.JobCount(c.Masters[l]); n != 1000 {
		t.Fatalf("new leader has %d jobs", n)
	}
	// Ids are dense and unique: 1..1000.
	for id := int64(1); id <= 1000; id++ {
		if _, ok := c.Masters[l].FSM().State().Job(id); !ok {
			t.Fatalf("job %d missing on the new leader", id)
		}
	}
	// The new leader accepts writes, also through the remaining follower.
	other := 3 - l - old
	c.Admit(other, "after", 10)
	eventually(t, 10*time.Second, "1010 jobs on the leader", func() bool { return mastertest.JobCount(c.Masters[l]) == 1010 })

	// The killed master restarts from its data dir and catches up.
	c.Start(old)
	eventually(t, 15*time.Second, "the restarted master catches up", func() bool { return mastertest.JobCount(c.Masters[old]) == 1010 })
	b1, b2 := c.Masters[old].FSM().State().Books(), c.Masters[l].FSM().State().Books()
	if fmt.Sprint(b1) != fmt.Sprint(b2) {
		t.Fatalf("books differ after catch-up:\n%v\n%v", b1, b2)
	}
}

// A master far behind is brought up by snapshot install. On raft-boltdb:
// raft-wal truncates its head logically and keeps serving the entries of
// its open segment, so a lagging wal master catches up from the log
// instead (as in TestFollowerAdmissionsSurviveLeaderLoss; docs/decisions.md).
func TestFarBehindMasterCatchesUpBySnapshot(t *testing.T) {
	c := mastertest.New(t, func(n *config.Node) {
		n.RaftLogStore = config.RaftLogStoreBoltDB
		n.SnapshotThreshold = 64
		n.TrailingLogs = 16
	})
	l := c.Leader()
	c.Setup(l)
	lag := (l + 1) % 3
	c.Kill(lag)
	c.Admit(l, "s", 300)
	if err := c.Masters[l].Node().Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.Start(lag)
	eventually(t, 20*time.Second, "the lagging master catches up", func() bool { return mastertest.JobCount(c.Masters[lag]) == 300 })
	// Raft records the installed snapshot's index just after the FSM restore
	// that made the jobs visible.
	eventually(t, 10*time.Second, "the lagging master to record an installed snapshot", func() bool {
		s := c.Masters[lag].Node().Stats()["last_snapshot_index"]
		return s != "" && s != "0"
	})
	if fmt.Sprint(c.Masters[lag].FSM().State().Books()) != fmt.Sprint(c.Masters[l].FSM().State().Books()) {
		t.Fatal("books differ after snapshot install")
	}
}
