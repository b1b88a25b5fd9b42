//go:build !unix

package rpc

// alive reports whether an idle connection can carry a request. Without a
// portable non-blocking peek, only a locally closed connection is known
// dead; a call on one the peer closed fails before any response byte and is
// retried once on a fresh connection (idempotent calls only).
func alive(c *Conn) bool { return !c.raw.isClosed() }
