package admin

import "context"

// The HTTP read API (pkg/httpapi) answers from this Server's read methods;
// it needs two more things the Thrift methods do internally.

// CurrentRead returns nil once this replica reflects every entry committed
// when the call began (the leader's quorum-confirmed read index, asked of
// the leader by a follower): the HTTP API's ?consistent on any master. Its
// errors are those of a write that cannot be decided (NOT_LEADER naming the
// leader, UNAVAILABLE): the answer would not be current.
func (s *Server) CurrentRead(ctx context.Context) error { return s.current(ctx) }

// StaleWarning is what a read answered from this replica must say about
// itself ("" when it is current): the text the CLI prints.
func (s *Server) StaleWarning(consistent bool) string { return s.staleWarning(consistent) }
