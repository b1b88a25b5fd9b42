package admin

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// claimCase is one way of calling: with or without mutual TLS, with or
// without a claim, and the actor every event must then record.
type claimCase struct {
	name  string
	tls   bool
	claim string // "": none, as an older client sends
	want  raftfsm.Actor
}

const operatorCN = "lancemaster operator" // the development operator certificate

func claimCases() []claimCase {
	return []claimCase{
		{"mutual TLS", true, "alice", raftfsm.Actor{Name: operatorCN, Claimed: "alice", Verified: true}},
		{"plaintext", false, "alice", raftfsm.Actor{Name: "alice"}},
		{"mutual TLS, no claim", true, "", raftfsm.Actor{Name: operatorCN, Verified: true}},
		{"plaintext, no claim", false, "", raftfsm.Actor{Name: "operator"}},
	}
}

func actorOfEvent(e *adminapi.TAuditEvent) raftfsm.Actor {
	return raftfsm.Actor{Name: e.GetActor(), Claimed: e.GetClaimed(), Verified: e.GetVerified()}
}

// newRestoringServer is a leading ops server whose cluster restores, as a
// real FSM restore, cl.restoreFile: a snapshot of another cluster, whose
// trail holds one event (option.set of max_dispatch_per_round to 3).
func newRestoringServer(t *testing.T) (*Server, *opsCluster) {
	t.Helper()
	other := newOpsServer(t, nil, true)
	if _, err := other.SetOption(context.Background(), options.OptMaxDispatchPerRound, "3", ""); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := other.d.Reader.State().WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	cl := &opsCluster{restoreFile: snap.Bytes()}
	s := newOpsServer(t, cl, true)
	cl.restoreInto = s.d.Reader.(*raftfsm.FSM)
	return s, cl
}

// claimFixture is a restoring ops server (membership, restore) serving its
// admin API on loopback, with mutual TLS or without.
type claimFixture struct {
	s      *Server
	cl     *opsCluster
	client *rpc.MasterClient
}

func newClaimFixture(t *testing.T, pki string, tls bool) *claimFixture {
	t.Helper()
	s, cl := newRestoringServer(t)
	srvCfg, cliCfg := rpc.DefaultConfig(), rpc.DefaultConfig()
	srvCfg.SocketTimeout, cliCfg.SocketTimeout = 5*time.Second, 5*time.Second
	var opts []rpc.ServerOption
	if tls {
		srvCfg, cliCfg = devTLS(t, pki, certs.RoleMaster), devTLS(t, pki, certs.RoleOperator)
		opts = append(opts, rpc.WithPolicy(rpc.MasterPolicy()))
	}
	addr := serveServerWith(t, s, srvCfg, opts...)
	return &claimFixture{s: s, cl: cl, client: rpc.NewMasterClient([]string{addr}, cliCfg, zap.NewNop())}
}

func (f *claimFixture) call(t *testing.T, fn func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.client.Call(ctx, fn); err != nil {
		t.Fatal(err)
	}
}

// oldAddBackend calls addBackend as a client of the release before the
// actor argument did: its arguments are one field, 1: address (showBackend's
// arguments have that very shape, so they are what goes on the wire).
func oldAddBackend(ctx context.Context, a *adminapi.LanceMasterServiceClient, address string) error {
	var res adminapi.LanceMasterServiceAddBackendResult
	if _, err := a.Client_().Call(ctx, "addBackend", &adminapi.LanceMasterServiceShowBackendArgs{Backend: address}, &res); err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	return nil
}

// Every admin change records the name the client claims (--as): under
// mutual TLS beside the identity the certificate proves, without TLS as the
// actor. A client that claims nothing (an older one, whose calls lack the
// argument) records the certificate's identity, or "operator".
func TestAuditEveryAdminChangeRecordsTheClaim(t *testing.T) {
	pki := t.TempDir()
	if _, err := certs.WriteDevCerts(pki, certs.DevOptions{Hosts: []string{"127.0.0.1"}, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range claimCases() {
		t.Run(tc.name, func(t *testing.T) {
			f := newClaimFixture(t, pki, tc.tls)
			claim := tc.claim
			var field *string // the request structs' optional actor
			if claim != "" {
				field = &claim
			}
			f.call(t, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
				root := "/data/lake"
				if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root}, claim); err != nil {
					return err
				}
				if _, err := a.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", CredentialsRef: new("lake-2"), Actor: field}); err != nil {
					return err
				}
				if err := a.RemoveCatalog(ctx, "lake", claim); err != nil {
					return err
				}
				if claim == "" {
					if err := oldAddBackend(ctx, a, "127.0.0.1:9"); err != nil {
						return err
					}
				} else if _, err := a.AddBackend(ctx, "127.0.0.1:9", claim); err != nil {
					return err
				}
				if err := a.RemoveBackend(ctx, "127.0.0.1:9", claim); err != nil {
					return err
				}
				if _, err := a.SetOption(ctx, options.OptMaxDispatchPerRound, "4", claim); err != nil {
					return err
				}
				if _, err := a.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: "m4", RaftAddress: "127.0.0.1:7104", Actor: field}); err != nil {
					return err
				}
				if _, err := a.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m4", Actor: field}); err != nil {
					return err
				}
				_, err := a.TransferLeader(ctx, "", claim)
				return err
			})
			evs := events(t, f.s, nil)
			want := []string{raftfsm.AuditRaftTransferLeader, raftfsm.AuditRaftRemovePeer, raftfsm.AuditRaftAddVoter, raftfsm.AuditOptionSet,
				raftfsm.AuditBackendRemove, raftfsm.AuditBackendAdd, raftfsm.AuditCatalogRemove, raftfsm.AuditCatalogUpdate, raftfsm.AuditCatalogCreate}
			if got := kinds(evs); !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			for _, e := range evs {
				if got := actorOfEvent(e); got != tc.want {
					t.Errorf("%s: actor %+v, want %+v", e.Kind, got, tc.want)
				}
			}
			if opt, err := f.s.GetOption(context.Background(), options.OptMaxDispatchPerRound); err != nil ||
				opt.GetChangedBy() != tc.want.Name || opt.GetChangedByClaimed() != tc.want.Claimed {
				t.Errorf("option changed by %q (claimed %q), %v", opt.GetChangedBy(), opt.GetChangedByClaimed(), err)
			}

			// The restore replaces the trail with the file's; its own event
			// and the dispatcher pause come after, and record the claim too.
			f.call(t, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
				_, err := UploadSnapshot(ctx, a, bytes.NewReader(f.cl.restoreFile), int64(len(f.cl.restoreFile)), claim)
				return err
			})
			evs = events(t, f.s, nil)
			if got := kinds(evs); !slices.Equal(got, []string{raftfsm.AuditSnapshotRestore, raftfsm.AuditOptionSet, raftfsm.AuditOptionSet}) {
				t.Fatalf("events after the restore %v", got)
			}
			for _, e := range evs[:2] {
				if got := actorOfEvent(e); got != tc.want {
					t.Errorf("after the restore, %s %s: actor %+v, want %+v", e.Kind, e.Subject, got, tc.want)
				}
			}
		})
	}
}

// A claim no replica would store is refused before anything changes, also
// where the event is journaled only after the change (membership).
func TestAuditRefusesABadClaimBeforeTheChange(t *testing.T) {
	f := newClaimFixture(t, "", false)
	ctx := context.Background()
	before := f.s.d.Reader.State().AppliedIndex()
	for _, bad := range []string{strings.Repeat("x", job.MaxNameBytes+1), "ev\x07e"} {
		steps := map[string]error{}
		_, steps["createCatalog"] = f.s.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: new("/data/lake")}, bad)
		_, steps["addBackend"] = f.s.AddBackend(ctx, "127.0.0.1:9", bad)
		_, steps["setOption"] = f.s.SetOption(ctx, options.OptMaxDispatchPerRound, "4", bad)
		_, steps["addVoter"] = f.s.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: "m4", RaftAddress: "127.0.0.1:7104", Actor: &bad})
		_, steps["removePeer"] = f.s.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m1", Actor: &bad})
		_, steps["promote"] = f.s.Promote(ctx, &adminapi.TPromoteRequest{ID: "m4", Actor: &bad})
		_, steps["transferLeader"] = f.s.TransferLeader(ctx, "", bad)
		for name, err := range steps {
			if errCode(t, err) != adminapi.TErrorCode_INVALID || !strings.Contains(err.Error(), "actor") {
				t.Errorf("%s with claim %.20q: %v, want INVALID naming the actor", name, bad, err)
			}
		}
	}
	if got := f.s.d.Reader.State().AppliedIndex(); got != before {
		t.Fatalf("applied index %d → %d: a refused claim changed the journal", before, got)
	}
	f.cl.mu.Lock()
	defer f.cl.mu.Unlock()
	if len(f.cl.members) != 0 {
		t.Fatalf("membership changed: %v", f.cl.members)
	}
}
