package rpc

import (
	"errors"
	"fmt"

	"github.com/apache/thrift/lib/go/thrift"
)

// OpDial is the SendError.Op of a failed connect.
const OpDial = "dial"

// ErrNilRequest is returned (inside a *SendError that says nothing was sent)
// when a client method is called with a nil request.
var ErrNilRequest = errors.New("rpc: nil request")

// SendError is how every client call in this package fails. It tells the
// caller whether the request can have reached the peer:
//
//   - BytesMayHaveLeft == false: no byte of the request was handed to the
//     network (the connect failed, the context was done before the send, or
//     the first write failed before writing anything). The peer cannot have
//     acted on it; retrying elsewhere is safe.
//   - BytesMayHaveLeft == true: the peer may have received, and acted on, the
//     request; the outcome is unknown. This includes a peer that answered
//     with a Thrift TApplicationException (use IsUnknownMethod to tell an
//     UNKNOWN_METHOD answer apart).
//
// Err is the cause; errors.Is and errors.As see through a SendError (for
// example errors.Is(err, context.DeadlineExceeded)). Error strings carry the
// operation, the address and the transport's own message, never request
// content.
type SendError struct {
	Op               string // OpDial or the Thrift method name
	Addr             string // the peer's host:port
	BytesMayHaveLeft bool
	Err              error
}

func (e *SendError) Error() string {
	state := "request not sent"
	if e.BytesMayHaveLeft {
		state = "request may have been sent"
	}
	return fmt.Sprintf("rpc: %s %s (%s): %v", e.Op, e.Addr, state, e.Err)
}

// Unwrap returns the cause.
func (e *SendError) Unwrap() error { return e.Err }

// NotSent reports whether err proves that no byte of the request reached the
// network: it wraps a *SendError with BytesMayHaveLeft false. Any other error,
// including nil, reports false, so a caller that acts on NotSent is never
// wrong about delivery.
func NotSent(err error) bool {
	var se *SendError
	return errors.As(err, &se) && !se.BytesMayHaveLeft
}

// IsUnknownMethod reports whether err carries a Thrift TApplicationException
// UNKNOWN_METHOD: the peer answered that it does not implement the method
// (an older backend, or the wrong kind of server), so it did not act on it.
func IsUnknownMethod(err error) bool {
	var ae thrift.TApplicationException
	return errors.As(err, &ae) && ae.TypeId() == thrift.UNKNOWN_METHOD
}

// isApplicationException reports whether err is an answer from the peer
// (a TApplicationException) rather than a broken stream.
func isApplicationException(err error) bool {
	var ae thrift.TApplicationException
	return errors.As(err, &ae)
}
