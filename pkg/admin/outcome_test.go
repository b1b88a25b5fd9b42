package admin

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
)

// failingProposer fails every proposal with err, applying nothing.
type failingProposer struct {
	*raftfsmtest.Proposer
	err error
}

func (p failingProposer) Propose(context.Context, []byte) (*journal.TApplyResponse, error) {
	return nil, p.err
}

// §13.6: a write whose fate is unknown reaches the client as
// OUTCOME_UNKNOWN, never INTERNAL; one provably not applied says it is safe
// to retry. Both for the single-command path and the admissions' group
// commit.
func TestFateUnknownWritesAreOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code adminapi.TErrorCode
		msg  string
	}{
		{"leadership lost after the append",
			fmt.Errorf("cluster: %w: leadership lost before the entry was known to commit: leadership lost while committing log", cluster.ErrFateUnknown),
			adminapi.TErrorCode_OUTCOME_UNKNOWN, "may or may not have been applied"},
		{"forward failed after sending",
			fmt.Errorf("cluster: forward to leader m1 at 10.0.0.1:7201: forward to 10.0.0.1:7201: %w: read: connection reset", cluster.ErrFateUnknown),
			adminapi.TErrorCode_OUTCOME_UNKNOWN, "check its effect"},
		{"forward refused before sending",
			fmt.Errorf("cluster: forward to leader m1 at 10.0.0.1:7201: forward to 10.0.0.1:7201: %w: dial: connection refused", cluster.ErrNotApplied),
			adminapi.TErrorCode_UNAVAILABLE, "safe to retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			d := h.srv.d
			d.Proposer = failingProposer{h.prop, tc.err}
			srv := New(d)
			ctx := context.Background()
			_, err := srv.SetOption(ctx, options.OptDispatcherPaused, "true", "")
			if errCode(t, err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("set option: %v, want %s mentioning %q", err, tc.code, tc.msg)
			}
			_, err = srv.CreateIndex(ctx, createReq("items", "v", "vector", "IVF_PQ"))
			if errCode(t, err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("admission: %v, want %s mentioning %q", err, tc.code, tc.msg)
			}
		})
	}
}
