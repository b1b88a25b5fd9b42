package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// claimSent is the --as claim a recorded call carried: the creator or
// actor field of its request, else the argument of a scalar method.
func claimSent(r recorded) string {
	switch q := r.req.(type) {
	case interface{ GetCreator() string }: // admissions
		return q.GetCreator()
	case interface{ GetActor() string }:
		return q.GetActor()
	}
	return r.actor
}

// writeCommands lists the paths of every command that changes the cluster.
func writeCommands(c *cobra.Command) []string {
	var out []string
	if c.Annotations[annotationWrite] != "" {
		out = append(out, c.CommandPath())
	}
	for _, sub := range c.Commands() {
		out = append(out, writeCommands(sub)...)
	}
	return out
}

// Every command that changes the cluster sends the --as claim, so the
// audit trail records it for every admin change; without --as, $USER.
func TestEveryWriteCommandSendsTheClaim(t *testing.T) {
	t.Parallel()
	snap := filepath.Join(t.TempDir(), "s.snap")
	if err := os.WriteFile(snap, snapshotFileBytes(t, 2), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args   []string
		method string // "" : the snapshot restore (finishSnapshotRestore)
	}{
		{[]string{"jobs", "create-index", "lake.db.items", "idx", "--column", "id", "--type", "BTREE"}, "CreateIndex"},
		{[]string{"jobs", "drop-index", "lake.db.items", "idx"}, "DropIndex"},
		{[]string{"jobs", "optimize", "lake.db.items"}, "OptimizeDataset"},
		{[]string{"jobs", "resolve", "7", "--force-release", "--comment", "wiped"}, "ResolveJob"},
		{[]string{"jobs", "cancel", "7"}, "CancelJob"},
		{[]string{"catalogs", "create", "lake", "--root", "/data/lake"}, "CreateCatalog"},
		{[]string{"catalogs", "update", "lake", "--credentials", "lake-2"}, "UpdateCatalog"},
		{[]string{"catalogs", "remove", "lake"}, "RemoveCatalog"},
		{[]string{"backends", "add", "10.0.0.21:7301"}, "AddBackend"},
		{[]string{"backends", "remove", "3"}, "RemoveBackend"},
		{[]string{"backends", "drain", "3"}, "DrainBackend"},
		{[]string{"backends", "undrain", "3"}, "DrainBackend"},
		{[]string{"config", "set", "lance_index_job_dispatcher_paused", "true"}, "SetOption"},
		{[]string{"operator", "raft", "transfer-leader", "--to", "m2"}, "TransferLeader"},
		{[]string{"operator", "raft", "add-voter", "m4", "10.0.0.4:7202"}, "AddVoter"},
		{[]string{"operator", "raft", "remove-peer", "m4"}, "RemovePeer"},
		{[]string{"operator", "raft", "promote", "m4"}, "Promote"},
		{[]string{"operator", "snapshot", "restore", snap}, ""},
	}
	var covered []string
	for _, tc := range cases {
		for _, as := range []struct {
			flags []string
			want  string
		}{{[]string{"--as", "carol"}, "carol"}, {nil, "alice"}} {
			f := &fakeMaster{admit: &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(7)}, job: &adminapi.TJobView{JobID: 7},
				resolve: &adminapi.TResolveResponse{Job: &adminapi.TJobView{JobID: 7}}, catalog: &adminapi.TCatalog{Name: "lake"},
				backend: &adminapi.TBackend{BackendID: 3, Address: "10.0.0.21:7301"}, option: &adminapi.TOption{Key: "k", Value: "true"},
				peers: &adminapi.TRaftPeersResponse{Peers: []*adminapi.TRaftPeer{}}, leader: "m2"}
			sm := &snapMaster{fakeMaster: f}
			_, stderr, _ := cli(t, serve(t, sm), append(slices.Clone(as.flags), tc.args...)...)
			got, sent := sm.actor, sm.finished
			for _, c := range f.recordedCalls() {
				if c.method == tc.method {
					got, sent = claimSent(c), true
				}
			}
			switch {
			case !sent:
				t.Errorf("%v %v: no %s call was sent (stderr %q)", as.flags, tc.args, tc.method, stderr)
			case got != as.want:
				t.Errorf("%v %v: %s claimed %q, want %q", as.flags, tc.args, tc.method, got, as.want)
			}
		}
		covered = append(covered, "lancemaster "+tc.args[0]+" "+tc.args[1])
		if tc.args[0] == "operator" {
			covered[len(covered)-1] += " " + tc.args[2]
		}
	}
	for _, w := range writeCommands(newRootCmd(&globals{}, func(string) string { return "" })) {
		if !slices.Contains(covered, w) {
			t.Errorf("write command %q is not checked here: does it send the claim?", w)
		}
	}
}
