package rpc

import (
	"context"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
)

// recoverMiddleware turns a handler panic into a TApplicationException
// INTERNAL_ERROR answer; the connection and the process keep serving. A
// panic in a Thrift handler otherwise kills the whole process (toolchain
// notes, pitfall 3).
//
// Only the method name is logged: the panic value and the stack may hold
// request content, and requests carry storage credentials.
func recoverMiddleware(log *zap.Logger) thrift.ProcessorMiddleware {
	return func(name string, next thrift.TProcessorFunction) thrift.TProcessorFunction {
		return thrift.WrappedTProcessorFunction{
			Wrapped: func(ctx context.Context, seqID int32, in, out thrift.TProtocol) (ok bool, err thrift.TException) {
				defer func() {
					if r := recover(); r == nil {
						return
					}
					log.Error("rpc: handler panicked; answered INTERNAL_ERROR", zap.String("method", name))
					x := thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "internal error in "+name)
					if werr := writeException(ctx, out, name, seqID, x); werr != nil {
						ok, err = false, thrift.WrapTException(werr)
						return
					}
					ok, err = true, nil
				}()
				return next.Process(ctx, seqID, in, out)
			},
		}
	}
}

// deadlineMiddleware gives every request's handler a deadline of d (the
// server's SocketTimeout): a reply later than that is never read, since the
// client's own socket timeout has given up on it. It takes the place of
// Thrift's per-request connectivity check, which is off (server.go): a
// handler that waits on its context (a forwarded write waiting to be
// applied, a consistent read) ends even if its client has gone.
func deadlineMiddleware(d time.Duration) thrift.ProcessorMiddleware {
	return func(name string, next thrift.TProcessorFunction) thrift.TProcessorFunction {
		return thrift.WrappedTProcessorFunction{
			Wrapped: func(ctx context.Context, seqID int32, in, out thrift.TProtocol) (bool, thrift.TException) {
				ctx, cancel := context.WithTimeout(ctx, d)
				defer cancel()
				return next.Process(ctx, seqID, in, out)
			},
		}
	}
}

func writeException(ctx context.Context, out thrift.TProtocol, name string, seqID int32, x thrift.TApplicationException) error {
	if err := out.WriteMessageBegin(ctx, name, thrift.EXCEPTION, seqID); err != nil {
		return err
	}
	if err := x.Write(ctx, out); err != nil {
		return err
	}
	if err := out.WriteMessageEnd(ctx); err != nil {
		return err
	}
	return out.Flush(ctx)
}
