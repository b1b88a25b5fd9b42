package admin

import (
	"fmt"
	"time"
)

// staleContactAfter: a follower that has not heard its leader for this long
// says its reads may be stale. Raft's followers hear the leader every tenth
// of a heartbeat timeout (1 s by default), so this is many lost heartbeats.
const staleContactAfter = 5 * time.Second

// staleWarning is what a read answered from this replica must say about
// itself, or "": a consistent read, or one on the leader, is current; a
// follower that knows no leader, or has not heard it for a while, may be
// answering from a journal replica that stopped moving (Consul's
// X-Consul-KnownLeader and X-Consul-LastContact, said in words).
func (s *Server) staleWarning(consistent bool) string {
	if consistent || s.d.Proposer.IsLeader() {
		return ""
	}
	var last time.Time
	if s.d.LastContact != nil {
		last = s.d.LastContact()
	}
	who := "this master"
	if s.d.NodeID != "" {
		who = "master " + s.d.NodeID
	}
	const tail = "this answer comes from its own journal replica and may be stale (use --consistent to read through the leader)"
	leader, _ := s.d.Cluster.Leader()
	age := s.d.Clock().Sub(last).Round(time.Second)
	switch {
	case leader == "" && last.IsZero():
		return fmt.Sprintf("%s knows no leader and has not heard one: %s", who, tail)
	case leader == "":
		return fmt.Sprintf("%s knows no leader (it last heard one %s ago): %s", who, age, tail)
	case !last.IsZero() && age > staleContactAfter:
		return fmt.Sprintf("%s last heard the leader %s %s ago: %s", who, leader, age, tail)
	}
	return ""
}
