package master_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

func opsCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// saveSnapshot runs `operator snapshot save` through cl and returns the file.
func saveSnapshot(t *testing.T, cl *rpc.MasterClient) []byte {
	t.Helper()
	var buf bytes.Buffer
	err := cl.Call(opsCtx(t), func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		_, err := admin.DownloadSnapshot(ctx, c, &buf, func() error { buf.Reset(); return nil })
		return err
	})
	if err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	return buf.Bytes()
}

// restoreSnapshot runs `operator snapshot restore` through cl.
func restoreSnapshot(t *testing.T, cl *rpc.MasterClient, file []byte) (*adminapi.TSnapshotRestoreResponse, error) {
	t.Helper()
	var resp *adminapi.TSnapshotRestoreResponse
	err := cl.Call(opsCtx(t), func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = admin.UploadSnapshot(ctx, c, bytes.NewReader(file), int64(len(file)), "")
		return err
	})
	return resp, err
}

// digest is everything an operator can see of a journal state, in a
// canonical text: jobs with their revisions and states, catalogs, backends,
// options, the books and the id counter. The applied index is left out.
func digest(st *raftfsm.State) string {
	var b strings.Builder
	for after := int64(0); ; {
		recs, more := st.ListJobs(raftfsm.JobFilter{}, after, 1000)
		for _, r := range recs {
			fmt.Fprintf(&b, "job %d rev %d %s/%s %s.%s.%s\n", r.JobID, r.Rev, r.MutationState, r.RefreshState, r.DB, r.Table, r.DisplayIndexName)
		}
		if !more || len(recs) == 0 {
			break
		}
		after = recs[len(recs)-1].JobID
	}
	for _, c := range st.Catalogs() {
		fmt.Fprintf(&b, "catalog %d %s %s\n", c.ID, c.Name, c.RootURI)
	}
	for _, be := range st.Backends() {
		fmt.Fprintf(&b, "backend %d %s\n", be.ID, be.Address)
	}
	opts := st.OptionValues()
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "option %s=%s\n", k, opts[k])
	}
	fmt.Fprintf(&b, "books %v\nlast job %d\n", st.Books(), st.LastJobID())
	return b.String()
}

func wantAdminError(t *testing.T, err error, code adminapi.TErrorCode, text string) {
	t.Helper()
	var ae *adminapi.TAdminError
	if !errors.As(err, &ae) || ae.Code != code || !strings.Contains(ae.Message, text) {
		t.Fatalf("err = %v, want %s mentioning %q", err, code, text)
	}
}

// withHeader re-encodes file's header after edit (the digests made anew),
// so only what edit changed is wrong.
func withHeader(t *testing.T, file []byte, edit func(*cluster.SnapshotFileHeader)) []byte {
	t.Helper()
	h, off, err := cluster.ReadSnapshotFileHeader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	edit(h)
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	out := []byte("LMOPSNAP")
	out = binary.BigEndian.AppendUint32(out, uint32(len(js)))
	out = append(out, js...)
	sum := sha256.Sum256(js)
	out = append(out, sum[:]...)
	return append(out, file[off:]...)
}

// Save → inspect → restore on three masters over Thrift: the restore
// brings every master back to the saved state (jobs admitted after the save
// are gone); a flipped byte and an unknown format are refused and change
// nothing; the cluster takes writes afterwards, with ids continuing after
// the restored ones.
func TestSnapshotSaveInspectRestore(t *testing.T) {
	c := mastertest.New(t, nil)
	f := c.Follower()
	c.Setup(f)
	if err := c.Client(f).Call(opsCtx(t), func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.SetOption(ctx, options.OptDispatcherPaused, "true", "") // job states stay put
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.Admit(f, "a", 20)
	for i, m := range c.Masters {
		eventually(t, 10*time.Second, fmt.Sprintf("m%d has 20 jobs", i+1), func() bool { return mastertest.JobCount(m) == 20 })
	}

	file := saveSnapshot(t, c.Client(f)) // a follower: NOT_LEADER is followed to the leader
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	insp, err := cluster.InspectSnapshotFile(fh)
	fh.Close()
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	j := insp.Journal
	if j.Jobs != 20 || j.Catalogs != 1 || j.Backends != 1 || j.LastJobID != 20 || j.JobStates["PENDING"] != 20 ||
		j.Options[options.OptDispatcherPaused] != "true" {
		t.Fatalf("inspection: %+v", j)
	}
	if l := c.Leader(); insp.Header.NodeID != c.Nodes[l].NodeID {
		t.Fatalf("taken on %s, the leader is %s", insp.Header.NodeID, c.Nodes[l].NodeID)
	}
	want := digest(insp.State())
	if got := digest(c.Masters[f].FSM().State()); got != want {
		t.Fatalf("the saved state differs from the cluster's at save time:\n%s\nvs\n%s", want, got)
	}

	c.Admit(f, "b", 10)
	for i, m := range c.Masters {
		eventually(t, 10*time.Second, fmt.Sprintf("m%d has 30 jobs", i+1), func() bool { return mastertest.JobCount(m) == 30 })
	}
	before := digest(c.Masters[f].FSM().State())

	// Refused: a flipped byte in the body, in the header, an unknown file
	// format, an unknown journal format. Nothing changes.
	flipped := bytes.Clone(file)
	flipped[len(flipped)-100] ^= 0x10
	_, err = restoreSnapshot(t, c.Client(f), flipped)
	wantAdminError(t, err, adminapi.TErrorCode_INVALID, "body checksum mismatch")
	flipped = bytes.Clone(file)
	flipped[30] ^= 0x10
	_, err = restoreSnapshot(t, c.Client(f), flipped)
	wantAdminError(t, err, adminapi.TErrorCode_INVALID, "header checksum mismatch")
	_, err = restoreSnapshot(t, c.Client(f), withHeader(t, file, func(h *cluster.SnapshotFileHeader) { h.FormatVersion = 2 }))
	wantAdminError(t, err, adminapi.TErrorCode_INVALID, "unknown snapshot file format version 2")
	_, err = restoreSnapshot(t, c.Client(f), withHeader(t, file, func(h *cluster.SnapshotFileHeader) { h.Raft.SnapshotVersion = 99 }))
	wantAdminError(t, err, adminapi.TErrorCode_INVALID, "unsupported raft snapshot version")
	for i, m := range c.Masters {
		if got := digest(m.FSM().State()); got != before {
			t.Fatalf("m%d changed after a refused restore", i+1)
		}
	}

	resp, err := restoreSnapshot(t, c.Client(f), file)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if resp.SnapshotIndex != int64(insp.Header.Raft.Index) || resp.GetJobCount() != 20 || resp.Index <= resp.SnapshotIndex {
		t.Fatalf("restore response %+v", resp)
	}
	for i, m := range c.Masters {
		// ... and its applied index is past the restore (the catch-up entry).
		eventually(t, 15*time.Second, fmt.Sprintf("m%d holds the saved state", i+1), func() bool {
			st := m.FSM().State()
			return digest(st) == want && st.AppliedIndex() > uint64(resp.Index)
		})
	}
	for id := int64(21); id <= 30; id++ {
		if _, ok := c.Masters[f].FSM().State().Job(id); ok {
			t.Fatalf("job %d, admitted after the save, survived the restore", id)
		}
	}

	// The cluster goes on from the restored state.
	c.Admit(c.Follower(), "c", 1)
	l := c.Leader()
	eventually(t, 10*time.Second, "job 21 after the restore", func() bool {
		r, ok := c.Masters[l].FSM().State().Job(21)
		return ok && r.DisplayIndexName == "c0000"
	})
}

// A fourth master joins as a voter through the admin API (sent to a
// follower, redirected to the leader), catches up, and is removed again.
// A master added to a running cluster, started with join (the documented
// way: it waits for add-voter and takes the leader's configuration) or
// without (it bootstraps a throwaway first configuration that the leader's
// log replaces).
func TestAddVoterAndRemovePeerOverThrift(t *testing.T) {
	for _, join := range []bool{true, false} {
		t.Run(fmt.Sprintf("join=%v", join), func(t *testing.T) { testAddVoterAndRemovePeer(t, join) })
	}
}

func testAddVoterAndRemovePeer(t *testing.T, join bool) {
	c := mastertest.New(t, nil)
	f := c.Follower()
	c.Setup(f)
	c.Admit(f, "a", 5)

	p4, m4 := startFourthMaster(t, c, join) // audit_test.go
	if join {
		// Not a member yet: no configuration, no leader, nothing applied.
		if peers, err := m4.Node().Peers(); err != nil || len(peers) != 0 {
			t.Fatalf("a joining master has a configuration before add-voter: %+v %v", peers, err)
		}
		if id, _ := m4.Node().Leader(); id != "" || mastertest.JobCount(m4) != 0 {
			t.Fatalf("a joining master knows leader %q or %d jobs before add-voter", id, mastertest.JobCount(m4))
		}
	}

	call := func(fn func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error) error {
		return c.Client(f).Call(opsCtx(t), fn)
	}
	rpcAddr := p4.RPCAddress
	var resp *adminapi.TRaftPeersResponse
	if err := call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = cl.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: "m4", RaftAddress: p4.RaftAddress, RPCAddress: &rpcAddr})
		return err
	}); err != nil {
		t.Fatalf("add-voter: %v", err)
	}
	found := false
	for _, p := range resp.Peers {
		found = found || (p.ID == "m4" && p.GetSuffrage() == "Voter" && p.GetRPCAddress() == rpcAddr)
	}
	if !found || len(resp.Peers) != 4 {
		t.Fatalf("peers after add-voter: %+v", resp.Peers)
	}
	eventually(t, 15*time.Second, "m4 catches up", func() bool { return mastertest.JobCount(m4) == 5 })

	// The address book reaches every master, also the followers whose
	// peers lists lack m4 and which did not run add-voter.
	for i, m := range c.Masters {
		eventually(t, 15*time.Second, fmt.Sprintf("m%d learns m4's RPC address", i+1), func() bool {
			a, ok := m.FSM().State().MemberAddress("m4")
			return ok && a == rpcAddr
		})
	}
	// With m4 leading, a write through such a follower is forwarded to it.
	transfer := func(via *rpc.MasterClient, to string) {
		t.Helper()
		if err := via.Call(opsCtx(t), func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			_, err := cl.TransferLeader(ctx, to, "")
			return err
		}); err != nil {
			t.Fatalf("transfer leadership to %s: %v", to, err)
		}
	}
	transfer(c.Client(c.Leader()), "m4")
	eventually(t, 15*time.Second, "m4 leads", func() bool { return m4.Node().LeaderTerm() != 0 })
	for i, m := range c.Masters {
		eventually(t, 15*time.Second, fmt.Sprintf("m%d names m4's RPC address as the leader's", i+1), func() bool {
			id, addr := m.Node().Leader()
			return id == "m4" && addr == rpcAddr
		})
	}
	c.Admit(f, "c", 2)
	transfer(rpc.NewMasterClient([]string{rpcAddr}, rpc.DefaultConfig(), zap.NewNop()), c.Nodes[0].NodeID)
	eventually(t, 15*time.Second, "m1 leads", func() bool { return c.Masters[0].Node().LeaderTerm() != 0 })

	// Refusals keep their codes through the API.
	err := call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.AddVoter(ctx, &adminapi.TAddVoterRequest{ID: "m5", RaftAddress: p4.RaftAddress})
		return err
	})
	wantAdminError(t, err, adminapi.TErrorCode_ALREADY_EXISTS, "belongs to member")
	err = call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: c.Nodes[c.Leader()].NodeID})
		return err
	})
	wantAdminError(t, err, adminapi.TErrorCode_INVALID, "transfer leadership first")

	if err := call(func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) (err error) {
		resp, err = cl.RemovePeer(ctx, &adminapi.TRemovePeerRequest{ID: "m4"})
		return err
	}); err != nil {
		t.Fatalf("remove-peer: %v", err)
	}
	if len(resp.Peers) != 3 {
		t.Fatalf("peers after remove-peer: %+v", resp.Peers)
	}
	for i, m := range c.Masters {
		eventually(t, 15*time.Second, fmt.Sprintf("m%d forgets m4's RPC address", i+1), func() bool {
			_, ok := m.FSM().State().MemberAddress("m4")
			return !ok
		})
	}
	c.Admit(f, "b", 3)
}
