package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Who asked. Under mutual TLS a request's caller is proven by its verified
// certificate: that identity (the certificate's common name) is what a job
// records as its creator and an operator change as its actor. The name the
// client claims (--as, $USER) is kept beside it, as a claim. Without a
// verified certificate there is nothing better than the claim.

// verifiedCaller is the common name of the caller's verified certificate,
// or "" (plaintext, no certificate, or a call from inside this process).
func verifiedCaller(ctx context.Context) string {
	p := rpc.CallerFromContext(ctx)
	if p == nil {
		return ""
	}
	id := p.Identity()
	if !id.Verified || id.Subject == "" || job.ValidateActor("creator", id.Subject) != nil {
		return ""
	}
	return id.Subject
}

// stampCreator sets an admission's creator to the verified caller, moving
// the claimed name to ClaimedCreator when it differs.
func stampCreator(ctx context.Context, rec *job.Record) {
	cn := verifiedCaller(ctx)
	if cn == "" {
		return
	}
	if rec.Creator != cn && rec.Creator != "operator" {
		rec.ClaimedCreator = rec.Creator
	}
	rec.Creator = cn
}

// actorOf is who an operator change records: the verified caller, with the
// claimed name in parentheses when it says something else; else the claim.
func actorOf(ctx context.Context, claimed string) string {
	claimed = actorOr(claimed)
	cn := verifiedCaller(ctx)
	switch {
	case cn == "":
		return claimed
	case claimed == cn || claimed == "operator":
		return cn
	}
	a := cn + " (as " + claimed + ")"
	if len(a) > job.MaxNameBytes {
		return cn
	}
	return a
}
