package master_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// Members do not look healthy when they are not: with a follower down, the
// leader's list-peers says it is unreachable (and who answered), and
// lancemaster_raft_peer_healthy is 0 for it while lancemaster_raft_peers
// still counts the configuration.
func TestListPeersAndMetricsShowADownFollower(t *testing.T) {
	c := mastertest.NewWith(t, withHTTP(t, nil), nil)
	ld := c.Leader()
	f := c.Follower()
	fid := c.Nodes[f].NodeID
	peers := func() *adminapi.TRaftPeersResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp *adminapi.TRaftPeersResponse
		_ = c.Client(ld).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
			resp, err = a.ListPeers(ctx)
			return err
		})
		return resp
	}
	healthOf := func(resp *adminapi.TRaftPeersResponse, id string) string {
		for _, p := range resp.GetPeers() {
			if p.ID == id {
				return p.GetHealth()
			}
		}
		return ""
	}
	eventually(t, 20*time.Second, "the follower healthy on the leader", func() bool {
		return healthOf(peers(), fid) == "healthy"
	})
	c.Kill(f)
	eventually(t, 30*time.Second, "the killed follower unreachable on the leader", func() bool {
		resp := peers()
		return healthOf(resp, fid) == "unreachable" && resp.GetAnsweredBy() == c.Nodes[ld].NodeID
	})
	eventually(t, 10*time.Second, "lancemaster_raft_peer_healthy 0 for it", func() bool {
		_, fams := scrape(t, c.Masters[ld])
		v, ok := fams.Value("lancemaster_raft_peer_healthy", "peer_id", fid)
		self, _ := fams.Value("lancemaster_raft_peer_healthy", "peer_id", c.Nodes[ld].NodeID)
		return ok && v == 0 && self == 1 && value(t, fams, "lancemaster_raft_peers") == 2
	})
}

// transfer-leader to the leader itself says it is already the leader, and
// moves nothing (before, it answered as if leadership had been handed over).
func TestTransferLeaderToTheLeaderSaysSo(t *testing.T) {
	c := mastertest.New(t, nil)
	ld := c.Leader()
	id := c.Nodes[ld].NodeID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Client(ld).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.TransferLeader(ctx, id, "")
		return err
	})
	if got := errCode(t, err); got != adminapi.TErrorCode_ALREADY_EXISTS || !strings.Contains(err.Error(), "already the leader") {
		t.Fatalf("transfer to itself: %v (%v)", err, got)
	}
	if now := c.Leader(); now != ld {
		t.Fatalf("leadership moved from m%d to m%d", ld+1, now+1)
	}
}
