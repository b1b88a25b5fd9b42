package master_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// A drain is journaled: every master has it, a new leader keeps it and
// dispatches nothing there, `backends show` (asked of a follower) answers
// with the leader's view, and `operator snapshot save -` / `restore -`
// through the binary carry it in the file and back.
func TestDrainIsReplicatedAndSurvivesLeaderChangeAndSnapshot(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	c := mastertest.New(t, nil)
	f := c.Follower()
	c.Setup(f)
	c.SetOptions(f, map[string]string{options.OptEnableLocalFileMutation: "true"}) // the test catalog is a local path
	run := func(stdin []byte, args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, append([]string{"--address", c.Nodes[c.Follower()].RPCAdvertise, "--as", "ops"}, args...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("lancemaster %s: %v\nstderr: %s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), errb.String()
	}
	eventually(t, 15*time.Second, "the leader hears the backend", func() bool {
		out, _ := run(nil, "backends", "show", "1")
		return strings.Contains(out, "dispatchable:  yes")
	})
	if out, _ := run(nil, "backends", "drain", c.Backend.Addr()); !strings.Contains(out, "backend 1 ("+c.Backend.Addr()+") drained") {
		t.Fatalf("drain: %q", out)
	}
	for i, m := range c.Masters {
		eventually(t, 10*time.Second, fmt.Sprintf("m%d has the drain", i+1), func() bool {
			b, ok := m.FSM().State().Backend(1)
			return ok && b.Drained && b.DrainActor == "ops"
		})
	}

	// A new leader keeps it: jobs admitted now stay PENDING while the new
	// leader heartbeats the backend alive.
	c.Kill(c.Leader())
	c.Admit(c.Follower(), "d", 3)
	eventually(t, 15*time.Second, "the new leader hears the backend", func() bool {
		out, _ := run(nil, "backends", "show", "1")
		return strings.Contains(out, "alive:         yes") && strings.Contains(out, "dispatchable:  no") &&
			strings.Contains(out, "drained:       yes (drained ") && strings.Contains(out, " by ops)")
	})
	if n := len(c.Backend.Dispatches()); n != 0 {
		t.Fatalf("%d dispatches reached the drained backend", n)
	}

	// save - streams the file; it carries the drain.
	var file []byte
	out, stderr := run(nil, "operator", "snapshot", "save", "-")
	file = []byte(out)
	if !strings.Contains(stderr, "to stdout") {
		t.Fatalf("save stderr %q", stderr)
	}
	insp, err := cluster.InspectSnapshotFile(bytes.NewReader(file))
	if err != nil {
		t.Fatalf("the streamed file does not verify: %v", err)
	}
	if b, ok := insp.State().Backend(1); !ok || !b.Drained {
		t.Fatalf("the snapshot's backend: %+v", b)
	}

	// Undrain: the PENDING jobs go out (2, the per-backend bound), and
	// show lists the jobs holding its slots.
	run(nil, "backends", "undrain", "1")
	if !c.Backend.WaitForSubmits(2, 15*time.Second) {
		t.Fatalf("undrained: %d dispatches, want 2", len(c.Backend.Dispatches()))
	}
	eventually(t, 10*time.Second, "show lists the slot holders", func() bool {
		show, _ := run(nil, "backends", "show", "1")
		return strings.Contains(show, "slots:         2 held of 2") && strings.Contains(show, "RUNNING  CREATE    lake.db.items")
	})

	// restore - from stdin brings the drain back on every master.
	out, _ = run(file, "operator", "snapshot", "restore", "-")
	if !strings.Contains(out, "restored the snapshot") {
		t.Fatalf("restore stdout %q", out)
	}
	for i, m := range c.Masters {
		if m == nil {
			continue
		}
		eventually(t, 15*time.Second, fmt.Sprintf("m%d is drained again", i+1), func() bool {
			b, ok := m.FSM().State().Backend(1)
			return ok && b.Drained
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Client(c.Follower()).Call(ctx, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		_, err := cl.ShowBackend(ctx, "99")
		return err
	})
	wantAdminError(t, err, adminapi.TErrorCode_NOT_FOUND, "not registered")
}
