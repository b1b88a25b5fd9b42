package cluster

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// raftTLSFor issues a loopback certificate of role from ca into dir and
// returns the node's RaftTLS, built as pkg/master builds it.
func raftTLSFor(t *testing.T, ca *certs.CA, trust []byte, role certs.Role, name string) *RaftTLS {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := ca.Issue(certs.ForRole(role, []string{"127.0.0.1"}, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	f := rpc.TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	for path, data := range map[string][]byte{f.CA: trust, f.Cert: certPEM, f.Key: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := f.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &RaftTLS{
		Server:    c.ServerConfig(certs.RoleMaster),
		ClientFor: func(addr string) *tls.Config { return c.ClientConfig(addr, certs.RoleMaster) },
	}
}

func newCA(t *testing.T, name string) *certs.CA {
	t.Helper()
	ca, err := certs.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestRaftOverTLSElectsAndReplicates(t *testing.T) {
	ca := newCA(t, "cluster CA")
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.RaftTLS = raftTLSFor(t, ca, ca.CertPEM, certs.RoleMaster, cfg.NodeID)
	})
	c.startAll()
	ld := c.leader()
	proposeMany(t, ld.node(), 0, 20, 4)
	c.awaitCount(20)
	// A follower's write is forwarded and replicated back over TLS too.
	mustPropose(t, c.followers(ld)[0].node(), 20)
	c.awaitCount(21)
}

// A node whose certificate another CA issued, or whose certificate is not a
// master's, can neither be replicated to nor disturb the others: the two
// good masters elect a leader and commit; the intruder applies nothing and
// never learns a leader.
func TestRaftOverTLSRefusesIntruders(t *testing.T) {
	ca := newCA(t, "cluster CA")
	for _, tc := range []struct {
		name string
		tls  func(t *testing.T) *RaftTLS
	}{
		{"a certificate from another CA", func(t *testing.T) *RaftTLS {
			other := newCA(t, "other CA")
			return raftTLSFor(t, other, other.CertPEM, certs.RoleMaster, "m3")
		}},
		{"a backend certificate from the cluster CA", func(t *testing.T) *RaftTLS {
			return raftTLSFor(t, ca, ca.CertPEM, certs.RoleBackend, "m3")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 3, func(cfg *Config) {
				if cfg.NodeID == "m3" {
					cfg.RaftTLS = tc.tls(t)
					return
				}
				cfg.RaftTLS = raftTLSFor(t, ca, ca.CertPEM, certs.RoleMaster, cfg.NodeID)
			})
			c.startAll()
			intruder := c.nodes[2]
			var ld *testNode
			eventually(t, 15*time.Second, "m1 or m2 to lead", func() bool {
				for _, tn := range c.nodes[:2] {
					if tn.node().IsLeader() {
						ld = tn
						return true
					}
				}
				return false
			})
			proposeMany(t, ld.node(), 0, 5, 2)
			for _, tn := range c.nodes[:2] {
				eventually(t, 10*time.Second, tn.cfg.NodeID+" applies 5 commands", func() bool { return tn.currentFSM().Count() == 5 })
			}
			// Several election timeouts: the intruder has had every chance.
			time.Sleep(1500 * time.Millisecond)
			if n := intruder.currentFSM().Count(); n != 0 {
				t.Fatalf("the intruder applied %d commands", n)
			}
			if id, _ := intruder.node().Leader(); id != "" || intruder.node().IsLeader() {
				t.Fatalf("the intruder knows leader %q (leads: %v)", id, intruder.node().IsLeader())
			}
			if !ld.node().IsLeader() {
				t.Fatal("the intruder disturbed the leader")
			}
		})
	}
}

func TestRaftTLSStreamRefusesPlaintextAndBadConfig(t *testing.T) {
	ca := newCA(t, "cluster CA")
	rt := raftTLSFor(t, ca, ca.CertPEM, certs.RoleMaster, "m1")
	tr, err := newTransport("127.0.0.1:0", nil, rt, 1, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// A plaintext raft peer gets nothing: its request is not a handshake.
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var resp raft.RequestVoteResponse
	err = plain.RequestVote("m1", tr.LocalAddr(), &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("x"), Addr: []byte(plain.LocalAddr())}, Term: 9}, &resp)
	if err == nil {
		t.Fatal("a plaintext RequestVote was answered by a TLS transport")
	}

	noClientAuth := *rt
	noClientAuth.Server = rt.Server.Clone()
	noClientAuth.Server.ClientAuth = tls.NoClientCert
	if _, err := newTransport("127.0.0.1:0", nil, &noClientAuth, 1, time.Second, nil); err == nil {
		t.Fatal("raft TLS without client certificates was accepted")
	}
	if _, err := newTransport("0.0.0.0:0", nil, rt, 1, time.Second, nil); err == nil {
		t.Fatal("an unspecified advertise address was accepted")
	}
	if _, err := newTransport("127.0.0.1:0", &net.TCPAddr{IP: net.IPv4zero, Port: 1}, rt, 1, time.Second, nil); err == nil {
		t.Fatal("an unspecified advertise address was accepted")
	}
}

// A client that connects to the Raft port and sends nothing is closed once
// the first-read deadline passes, over plaintext and over TLS (raft itself
// would read it for ever); a real peer's request on a fresh connection is
// still served after that deadline would have passed for the silent one.
func TestSilentConnectionToRaftIsClosed(t *testing.T) {
	ca := newCA(t, "cluster CA")
	for name, rt := range map[string]*RaftTLS{"plaintext": nil, "tls": raftTLSFor(t, ca, ca.CertPEM, certs.RoleMaster, "m1")} {
		t.Run(name, func(t *testing.T) {
			tr, err := newTransport("127.0.0.1:0", nil, rt, 1, 200*time.Millisecond, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			go func() { // answer whatever reaches the consumer
				for rpc := range tr.Consumer() {
					rpc.Respond(&raft.RequestVoteResponse{Term: 9}, nil)
				}
			}()
			c, err := net.Dial("tcp", string(tr.LocalAddr()))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			_, err = c.Read(make([]byte, 1))
			if ne, ok := err.(net.Error); err == nil || (ok && ne.Timeout()) {
				t.Fatalf("a silent connection was kept open (read: %v after %v)", err, time.Since(start))
			}
			if rt != nil {
				return // a TLS peer's request is covered by TestRaftOverTLSElectsAndReplicates
			}
			peer, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			var resp raft.RequestVoteResponse
			if err := peer.RequestVote("m1", tr.LocalAddr(), &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("x"), Addr: []byte(peer.LocalAddr())}, Term: 9}, &resp); err != nil || resp.Term != 9 {
				t.Fatalf("a plaintext peer's RequestVote: %v %+v", err, resp)
			}
		})
	}
}
