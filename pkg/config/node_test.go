package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

const exampleNode = `
node_id: m1
data_dir: /var/lib/lancemaster
secrets_dir: /etc/lancemaster/secrets
peers:
  - {id: m1, raft_address: "10.0.0.1:7000", rpc_address: "10.0.0.1:9090"}
  - {id: m2, raft_address: "10.0.0.2:7000", rpc_address: "10.0.0.2:9090"}
  - {id: m3, raft_address: "10.0.0.3:7000", rpc_address: "10.0.0.3:9090"}
raft_bind: "0.0.0.0:7000"
timeouts: fast
election_timeout: 750ms
snapshot_interval: 30s
raft_log_store: wal
log_format: console
log_level: debug
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadNodeExample(t *testing.T) {
	n, err := LoadNode(writeFile(t, "node.yaml", exampleNode))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if n.RaftAdvertise != "10.0.0.1:7000" || n.RPCAdvertise != "10.0.0.1:9090" {
		t.Fatalf("advertise not derived from the peers entry: %q %q", n.RaftAdvertise, n.RPCAdvertise)
	}
	if n.RaftBind != "0.0.0.0:7000" || n.RPCBind != "10.0.0.1:9090" {
		t.Fatalf("binds: %q %q", n.RaftBind, n.RPCBind)
	}
	want := RaftTimeouts{Heartbeat: 500 * time.Millisecond, Election: 750 * time.Millisecond, LeaderLease: 250 * time.Millisecond, Commit: 50 * time.Millisecond}
	if got := n.RaftTimeouts(); got != want {
		t.Fatalf("timeouts = %+v, want %+v", got, want)
	}
	if n.SnapshotInterval != 30*time.Second || n.SnapshotThreshold != DefaultSnapshotThreshold || n.TrailingLogs != DefaultTrailingLogs {
		t.Fatalf("snapshot settings: %+v", n)
	}
	if n.RaftLogStore != RaftLogStoreWAL || DefaultNode().RaftLogStore != RaftLogStoreAuto {
		t.Fatalf("raft_log_store %q, default %q", n.RaftLogStore, DefaultNode().RaftLogStore)
	}
	if err := n.Validate(); err != nil {
		t.Fatalf("Validate is not idempotent: %v", err)
	}
}

func TestDefaultProfile(t *testing.T) {
	got := DefaultNode().RaftTimeouts()
	want := RaftTimeouts{Heartbeat: time.Second, Election: time.Second, LeaderLease: 500 * time.Millisecond, Commit: 50 * time.Millisecond}
	if got != want {
		t.Fatalf("default profile = %+v", got)
	}
}

func TestLoadNodeRejectsTyposAndJunk(t *testing.T) {
	for name, content := range map[string]string{
		"unknown key":      "node_id: m1\ndata_dri: /x\n",
		"nested typo":      "peers:\n  - {id: a, raft_adress: 'h:1'}\n",
		"duplicate key":    "node_id: m1\nnode_id: m2\n",
		"integer duration": "snapshot_interval: 30\n",
		"two documents":    "node_id: m1\n---\nnode_id: m2\n",
	} {
		if _, err := ParseNode([]byte(content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := LoadNode(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
	if n, err := ParseNode(nil); err != nil || n.LogLevel != DefaultLogLevel {
		t.Errorf("empty file: %v, %+v", err, n)
	}
}

func validNode() *Node {
	n := DefaultNode()
	n.NodeID = "m1"
	n.DataDir = "/data"
	n.Peers = []Peer{
		{ID: "m1", RaftAddress: "127.0.0.1:7001", RPCAddress: "127.0.0.1:9091"},
		{ID: "m2", RaftAddress: "127.0.0.1:7002", RPCAddress: "127.0.0.1:9092"},
	}
	return n
}

func TestValidateErrors(t *testing.T) {
	cases := map[string]struct {
		mut  func(*Node)
		want string
	}{
		"no node id":         {func(n *Node) { n.NodeID = "" }, "node_id is required"},
		"bad node id":        {func(n *Node) { n.NodeID = "a b" }, "node_id \"a b\""},
		"not among peers":    {func(n *Node) { n.NodeID = "m9" }, "not among peers (ids: m1, m2)"},
		"no peers":           {func(n *Node) { n.Peers = nil }, "peers is empty"},
		"duplicate peer id":  {func(n *Node) { n.Peers[1].ID = "m1" }, "listed twice"},
		"duplicate address":  {func(n *Node) { n.Peers[1].RaftAddress = n.Peers[0].RaftAddress }, "used by another peer"},
		"address no port":    {func(n *Node) { n.Peers[1].RPCAddress = "10.0.0.2" }, "peers[1].rpc_address \"10.0.0.2\" is not host:port"},
		"port out of range":  {func(n *Node) { n.Peers[1].RaftAddress = "h:70000" }, "port must be 1-65535"},
		"unspecified host":   {func(n *Node) { n.Peers[0].RaftAddress = "0.0.0.0:7001" }, "cannot dial an unspecified host"},
		"advertise mismatch": {func(n *Node) { n.RPCAdvertise = "127.0.0.1:1" }, "rpc_advertise 127.0.0.1:1 differs"},
		"bad bind":           {func(n *Node) { n.RaftBind = "nope" }, "raft_bind \"nope\" is not host:port"},
		"bad http bind":      {func(n *Node) { n.HTTPBind = ":99999" }, "http_bind \":99999\": port must be 1-65535"},
		"rpc bind port 0":    {func(n *Node) { n.RPCBind = "127.0.0.1:0" }, "rpc_bind \"127.0.0.1:0\": port must be"},
		"no data dir":        {func(n *Node) { n.DataDir = "" }, "data_dir is required"},
		"bad profile":        {func(n *Node) { n.Timeouts = "turbo" }, "timeouts \"turbo\""},
		"tiny timeout":       {func(n *Node) { n.HeartbeatTimeout = time.Millisecond }, "heartbeat_timeout 1ms"},
		"lease > heartbeat":  {func(n *Node) { n.LeaderLeaseTimeout = 2 * time.Second }, "leader_lease_timeout 2s must not exceed"},
		"election < hb":      {func(n *Node) { n.ElectionTimeout = 100 * time.Millisecond }, "must not be below heartbeat_timeout"},
		"zero threshold":     {func(n *Node) { n.SnapshotThreshold = 0 }, "snapshot_threshold"},
		"bad log format":     {func(n *Node) { n.LogFormat = "xml" }, "log_format \"xml\""},
		"bad log store":      {func(n *Node) { n.RaftLogStore = "rocksdb" }, "raft_log_store \"rocksdb\": use auto, boltdb or wal"},
		"bad log level":      {func(n *Node) { n.LogLevel = "loud" }, "log_level \"loud\""},
	}
	for name, c := range cases {
		n := validNode()
		c.mut(n)
		err := n.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, c.want)
		}
	}
	if err := validNode().Validate(); err != nil {
		t.Fatalf("valid node: %v", err)
	}
	n := validNode()
	n.HTTPBind = "127.0.0.1:0" // nothing dials it by configuration: the kernel picks the port
	if err := n.Validate(); err != nil {
		t.Fatalf("http_bind port 0: %v", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	n := DefaultNode()
	err := n.Validate()
	for _, want := range []string{"node_id is required", "peers is empty", "data_dir is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, missing %q", err, want)
		}
	}
}

func TestNodeFlagsOverrideOnlyWhatWasSet(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	nf := BindNodeFlags(fs)
	err := fs.Parse([]string{
		"--node-id=m2", "--timeouts=fast", "--heartbeat-timeout=400ms", "--log-level=warn", "--join",
		"--peer", "m1=127.0.0.1:7001,127.0.0.1:9091", "--peer", "m2=127.0.0.1:7002,127.0.0.1:9092",
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := LoadNode(writeFile(t, "node.yaml", exampleNode))
	if err != nil {
		t.Fatal(err)
	}
	n.RaftBind = "" // the example binds 0.0.0.0:7000; let it follow the new peers
	if err := nf.Apply(n); err != nil {
		t.Fatal(err)
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if n.NodeID != "m2" || n.RaftAdvertise != "127.0.0.1:7002" || len(n.Peers) != 2 || n.LogLevel != "warn" || !n.Join {
		t.Fatalf("flags not applied: %+v", n)
	}
	if n.DataDir != "/var/lib/lancemaster" || n.LogFormat != "console" || n.SnapshotInterval != 30*time.Second {
		t.Fatalf("unset flags clobbered the file: %+v", n)
	}
	if got := n.RaftTimeouts(); got.Heartbeat != 400*time.Millisecond || got.Election != 750*time.Millisecond {
		t.Fatalf("timeouts = %+v", got)
	}
}

func TestParsePeer(t *testing.T) {
	p, err := ParsePeer("m1=h1:1,h1:2")
	if err != nil || p != (Peer{ID: "m1", RaftAddress: "h1:1", RPCAddress: "h1:2"}) {
		t.Fatalf("ParsePeer = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "m1", "m1=h:1", "=h:1,h:2", "m1=h:1,h:2,h:3"} {
		if _, err := ParsePeer(bad); err == nil {
			t.Errorf("ParsePeer(%q) accepted", bad)
		}
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	nf := BindNodeFlags(fs)
	if err := fs.Parse([]string{"--peer=broken"}); err != nil {
		t.Fatal(err)
	}
	if err := nf.Apply(DefaultNode()); err == nil {
		t.Fatal("a broken --peer was applied")
	}
}

func TestNewLogger(t *testing.T) {
	for _, f := range []string{"json", "console"} {
		l, err := NewLogger(f, "debug")
		if err != nil {
			t.Fatal(err)
		}
		if !l.Core().Enabled(-1) {
			t.Fatalf("%s: debug not enabled", f)
		}
	}
	l, err := NewLogger("json", "warn")
	if err != nil || l.Core().Enabled(0) {
		t.Fatalf("warn logger enables info: %v", err)
	}
	if _, err := NewLogger("xml", "info"); err == nil {
		t.Fatal("xml accepted")
	}
	if _, err := NewLogger("json", "fatal"); err == nil {
		t.Fatal("fatal accepted")
	}
}

// TestDeployLocalConfigsValidate keeps the demo cluster's files in step with
// the schema (KnownFields rejects a renamed key).
func TestDeployLocalConfigsValidate(t *testing.T) {
	paths, _ := filepath.Glob("../../deploy/local/master*.yaml")
	if len(paths) == 0 {
		t.Skip("no deploy/local configs in this checkout")
	}
	for _, p := range paths {
		n, err := LoadNode(p)
		if err == nil {
			err = n.Validate()
		}
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
