// Package rpc is lancemaster's shared Thrift plumbing: one Config (limits,
// timeouts, TLS) used by every listener and every client, a hardened Server,
// a client Dial with typed send errors, the BackendClient seam the dispatcher
// and admission use to reach backends, and the MasterClient the CLI and the
// masters use to reach masters.
//
// # Framed transport, binary protocol, everywhere
//
// Every connection speaks TFramedTransport + TBinaryProtocol, on both sides:
//
//   - The frame length comes first, so a server rejects an oversized or
//     garbage request (an HTTP probe reads as a ~1 GiB frame) after 4 bytes,
//     before allocating anything. Unframed transports have no such early
//     bound.
//   - With a frame, Thrift v0.25 knows how many bytes are left and rejects a
//     container header whose count cannot fit in them (a 30-byte frame that
//     claims 10^8 list entries), so MaxFrameSize also bounds allocations.
//   - Binary is the protocol Apache Doris speaks on the same structs, the
//     cheapest to decode, and the one the toolchain notes verified against
//     every hostile input we test. THeader adds nothing we use and was not
//     fully protected against container amplification.
//   - One protocol pair means no negotiation and no mixed-dialect bugs.
//
// # Hardening (see docs/rpc.md)
//
// The server sets SocketTimeout in its own TConfiguration (the constructor
// argument of the stock server socket is silently overwritten), calls
// SetLogContext before its accept loop, wraps every processor with a recover
// middleware that answers INTERNAL_ERROR, and holds each connection in a
// bounded pending pool, under a short handshake deadline, until its first
// request has arrived, then in a served slot of its caller's class (slots
// reserved for masters and backends under mutual TLS; admission.go).
//
// # Pipelined serving and shared connections (pipeline.go, mux.go, pool.go)
//
// A Server reads each request whole and runs it in a goroutine of its own,
// up to MaxRequestsPerConn per connection, answering with the request's
// sequence id. So a MuxConn can carry many calls at once on one connection,
// requests and replies queued together leaving in one write; a Conn makes
// one call at a time. A MuxPool keeps one MuxConn per address: the backend
// client's reads, the masters' calls to the leader and a backend's reports
// use one. A dispatch keeps a fresh Conn of its own.
//
// # Mutual TLS and authorization (docs/rpc.md)
//
// Config.Certs (TLSFiles.Load, tls.go) turns on mutual TLS 1.3 for every
// listener and client built from the Config, with the certificate files
// re-read when they change. A server given WithPolicy (MasterPolicy,
// BackendPolicy; authz.go) then authorizes every call by the role of the
// caller's verified certificate (pkg/certs) and answers a refusal in the
// method's own result type. Without mutual TLS there is no authorization.
//
// # Errors a caller can classify
//
// Every failure of a client call is a *SendError that says whether any byte
// of the request may have reached the peer. "Never connected" (a dial that
// failed, or a write that failed before its first byte) proves the request
// was not delivered; anything else may have been. On a MuxConn the answer
// is per call and as exact: a request still queued, or one that starts past
// the point a failed write reached, was not sent. The dispatcher relies on
// this split (DESIGN.md §7): the first is NOT_COMMITTED, the second UNKNOWN.
package rpc
