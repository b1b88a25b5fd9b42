package master

import (
	"context"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// Members do not look healthy when they are not: with a follower down, the
// leader's list-peers says it is unreachable (and who answered), and
// lancemaster_raft_peer_healthy is 0 for it while lancemaster_raft_peers
// still counts the configuration.
func TestListPeersAndMetricsShowADownFollower(t *testing.T) {
	c := newCluster3With(t, withHTTP(t, nil), nil)
	ld := c.leader()
	f := c.follower()
	fid := c.nodes[f].NodeID
	peers := func() *adminapi.TRaftPeersResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp *adminapi.TRaftPeersResponse
		_ = c.client(ld).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
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
	c.kill(f)
	eventually(t, 30*time.Second, "the killed follower unreachable on the leader", func() bool {
		resp := peers()
		return healthOf(resp, fid) == "unreachable" && resp.GetAnsweredBy() == c.nodes[ld].NodeID
	})
	eventually(t, 10*time.Second, "lancemaster_raft_peer_healthy 0 for it", func() bool {
		_, fams := scrape(t, c.masters[ld])
		v, ok := fams.Value("lancemaster_raft_peer_healthy", "peer_id", fid)
		self, _ := fams.Value("lancemaster_raft_peer_healthy", "peer_id", c.nodes[ld].NodeID)
		return ok && v == 0 && self == 1 && value(t, fams, "lancemaster_raft_peers") == 2
	})
}
