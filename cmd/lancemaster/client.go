package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// adminCall is one admin API exchange, run against whichever master
// pkg/rpc's MasterClient reaches (it fails over and follows leader hints).
type adminCall func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error

// call runs fn against the masters named by --address, bounded by
// --timeout. A failed call is a *callError carrying the addresses it tried,
// so execute can say where it looked.
func (g *globals) call(cmd *cobra.Command, fn adminCall) error {
	addrs, err := g.addressList()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()

	cfg := rpc.DefaultConfig()
	// --timeout bounds the whole command; a reply may legitimately take long
	// (admission inspects the dataset through a backend).
	cfg.SocketTimeout = g.timeout
	cfg.ConnectTimeout = min(cfg.ConnectTimeout, g.timeout)
	if err := g.applyTLS(&cfg); err != nil {
		return err
	}
	// The CLI never logs: its only outputs are the result and the Error line.
	mc := rpc.NewMasterClient(addrs, cfg, zap.NewNop())
	if err := mc.Call(ctx, fn); err != nil {
		if hint := g.tlsMismatch(addrs, err); hint != "" {
			return usagef("%s", hint)
		}
		return &callError{addrs: addrs, err: err, timedOut: ctx.Err() != nil, timeout: g.timeout.String(),
			write: cmd.Annotations[annotationWrite] != ""}
	}
	return nil
}

// addressList splits --address into its non-empty entries.
func (g *globals) addressList() ([]string, error) {
	var out []string
	for _, a := range strings.Split(g.addresses, ",") {
		if a = strings.TrimSpace(a); a != "" {
			// A malformed address is the command line's mistake: exit 2,
			// nothing sent (not "no master reachable").
			if _, err := parseHostPort(a); err != nil {
				return nil, usagef("--address: %v", err)
			}
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, usagef("no master address: set --address or %s", envAddress)
	}
	return out, nil
}

// annotationWrite marks a command that changes the cluster: when its call
// fails after the request may have left, the Error line says so.
const annotationWrite = "lancemaster/write"

func writeCommand() map[string]string { return map[string]string{annotationWrite: "true"} }

// callError is a failed admin call and the addresses that were tried.
type callError struct {
	addrs    []string
	err      error
	timedOut bool
	timeout  string
	write    bool
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// describeError turns a failed command into its exit code and the text of
// its "Error: " line: "CODE: message" for a typed admin error.
func describeError(err error) (int, string) {
	var ae *adminapi.TAdminError
	if errors.As(err, &ae) {
		if ae.Code == adminapi.TErrorCode_OUTCOME_UNKNOWN {
			// The master cannot tell whether the write was applied: as
			// for a call that broke after sending, exit 3 (§13.6).
			return exitUnreachable, fmt.Sprintf("%s: %s", ae.Code, oneLine(ae.Message))
		}
		return exitError, fmt.Sprintf("%s: %s", ae.Code, oneLine(ae.Message))
	}
	var ce *callError
	if !errors.As(err, &ce) {
		return exitError, oneLine(err.Error())
	}
	tried := strings.Join(ce.addrs, ", ")
	// A write that may have reached a master may have been applied.
	maybe := ""
	if ce.write && !rpc.NotSent(ce.err) {
		maybe = "; the request may have reached a master: check its effect before retrying"
	}
	var appErr thrift.TApplicationException
	switch {
	case errors.As(ce.err, &appErr):
		// The master answered, but not with a typed error (a handler
		// panic, an unknown method): it is reachable, the call failed.
		return exitError, fmt.Sprintf("%s: %s", adminapi.TErrorCode_INTERNAL, oneLine(appErr.Error()))
	case ce.timedOut:
		return exitUnreachable, fmt.Sprintf("%s: no answer within %s (tried %s): %s%s",
			adminapi.TErrorCode_TIMEOUT, ce.timeout, tried, oneLine(ce.err.Error()), maybe)
	case errors.Is(ce.err, rpc.ErrNoMaster):
		// Every address (and any leader hint) refused: nothing was sent.
		last := ce.err
		var se *rpc.SendError
		if errors.As(ce.err, &se) {
			last = se
		}
		return exitUnreachable, fmt.Sprintf("%s: no master reachable (tried %s); last error: %s",
			adminapi.TErrorCode_UNAVAILABLE, tried, oneLine(last.Error()))
	case isTimeout(ce.err):
		// A socket timeout during the call (a connect timeout moves on to
		// the next address and ends as ErrNoMaster above).
		return exitUnreachable, fmt.Sprintf("%s: no answer within %s (tried %s): %s%s",
			adminapi.TErrorCode_TIMEOUT, ce.timeout, tried, oneLine(ce.err.Error()), maybe)
	default:
		// The connection broke during the call.
		return exitUnreachable, fmt.Sprintf("%s: lost the master connection (tried %s): %s%s",
			adminapi.TErrorCode_UNAVAILABLE, tried, oneLine(ce.err.Error()), maybe)
	}
}

// isTimeout reports a deadline or a socket timeout anywhere in err's chain.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &t) && t.Timeout())
}

// oneLine keeps an error message on the single Error line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(sanitize(s)), " ")
}
