// Package master assembles one `lancemaster serve` process from a validated
// node configuration: the journal FSM, the raft node with its
// propose-or-forward client, the leader services, the report handler, the
// admin Thrift service, and the HTTP listener (metrics, health, the /v1 read
// API and the console). It only wires: the behaviour lives in the packages
// it assembles (docs/architecture.md). cmd/lancemaster's serve command, the
// multi-master tests and the benchmarks start masters through it.
package master

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/admin"
	pkgcerts "github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/cluster"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/dispatch"
	"github.com/lancemaster/lancemaster/pkg/httpapi"
	"github.com/lancemaster/lancemaster/pkg/metrics"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/report"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Options are what a master is built from. Node is required and must have
// passed Validate.
type Options struct {
	Node   *config.Node
	Logger *zap.Logger
	// RPC configures the Thrift listener and every client; zero = rpc.DefaultConfig().
	// Its Certs (else the node's tls files, when set) turn on mutual TLS
	// for the listener, the clients and Raft, and the listener's
	// authorization (rpc.MasterPolicy).
	RPC rpc.Config
	// Backends is the seam to the backends; nil = real Thrift clients.
	Backends rpc.BackendClient
	// Credentials resolves catalogs' credentials references; nil = files
	// under Node.SecretsDir.
	Credentials config.CredentialSource
	// Clock stamps commands and drives the leader services; nil = time.Now.
	Clock func() time.Time
	// Knobs are for tests and the benchmark only (knobs.go); nil in
	// production.
	Knobs *Knobs
	// Console is served under /ui/ on the HTTP listener (console.Handler());
	// nil: /ui/ answers 404.
	Console http.Handler
}

// Master is one running master. Its methods are safe for concurrent use.
type Master struct {
	log     *zap.Logger
	fsm     *raftfsm.FSM
	node    *cluster.Node
	server  *rpc.Server
	admin   *admin.Server
	reports *report.Handler
	pool    *dispatch.Pool
	metrics *masterMetrics
	http    *metrics.Server   // nil without http_bind
	fwd     *rpc.MasterClient // calls to the leader, on shared connections
}

// Start builds and starts a master: raft first (so a forwarded write can be
// applied as soon as the listener accepts it), then the Thrift listener.
func Start(ctx context.Context, o Options) (*Master, error) {
	if o.Node == nil {
		return nil, errors.New("master: no node configuration")
	}
	k := o.Knobs
	if k == nil {
		k = &Knobs{}
	}
	n := o.Node
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("node_id", n.NodeID))
	rcfg := o.RPC
	if rcfg == (rpc.Config{}) {
		rcfg = rpc.DefaultConfig()
	}
	if rcfg.Certs == nil && n.TLS.Enabled() {
		// Mutual TLS from the node file: every listener and client below,
		// and Raft, use these certificates (re-read when they change).
		loaded, err := n.TLS.Load(pkgcerts.RoleMaster, log.Named("tls"))
		if err != nil {
			return nil, fmt.Errorf("master: %w", err)
		}
		rcfg.Certs = loaded
	}
	var raftTLS *cluster.RaftTLS
	if c := rcfg.Certs; c != nil {
		raftTLS = &cluster.RaftTLS{
			Server:    c.ServerConfig(pkgcerts.RoleMaster),
			ClientFor: func(addr string) *tls.Config { return c.ClientConfig(addr, pkgcerts.RoleMaster) },
		}
	}
	backends := o.Backends
	if backends == nil {
		backends = rpc.NewThriftBackendClient(rcfg)
	}
	creds := o.Credentials
	if creds == nil {
		creds = config.DirCredentials{Dir: n.SecretsDir}
	}

	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	waker := dispatch.NewWaker()
	fsm := raftfsm.New(log.Named("fsm"))
	// Calls to the leader (forwarded writes and reports, leader-only reads)
	// share one connection per master.
	fwd := rpc.NewSharedMasterClient(nil, rcfg, log.Named("forward"))
	started := false
	defer func() {
		if !started {
			fwd.Close()
		}
	}()
	node, err := cluster.New(cluster.Config{
		NodeID: n.NodeID, RaftBind: n.RaftBind, RaftAdvertise: n.RaftAdvertise, DataDir: n.DataDir, Peers: n.Peers, Join: n.Join,
		AddressBook:       func(id string) (string, bool) { return fsm.State().MemberAddress(id) },
		Timeouts:          n.RaftTimeouts(),
		SnapshotThreshold: n.SnapshotThreshold, TrailingLogs: n.TrailingLogs, SnapshotInterval: n.SnapshotInterval,
		LogStore: n.RaftLogStore,
		Logger:   log.Named("cluster"), RaftTLS: raftTLS,
	}, wakingFSM{fsm, waker}, forwarder{fwd})
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	mm := newMasterMetrics(rcfg.Certs)
	timed := timedProposer{p: node, m: mm}
	leaderCall := fwd.CallAt
	pool, disp := wireLeaderServices(node, fsm, leaderServices{
		backends: backends, creds: creds, clock: clock, waker: waker, log: log, nodeID: n.NodeID,
		masterAddrs: config.RPCAddresses(n.Peers), hooks: k.DispatchHooks, heartbeat: k.HeartbeatInterval,
		proposer: timed, observer: mm,
	})
	optimizeAdmin := addOptimizePolicy(node, fsm, clock, k.OptimizePolicyInterval, log.Named("optimize-policy"))
	reports := report.New(report.Deps{
		Proposer: timed, Reader: fsm, Leader: node.Leader, Forward: leaderCall, Waker: waker,
		Logger: log.Named("report"), Clock: clock, CatchUp: node.ConsistentRead, VerifyLeader: node.VerifyLeader,
		Credentials: creds, // log tails are redacted of the catalog's credentials again before they are journaled
	})
	if err := node.Start(ctx); err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	mm.reg.MustRegister(&stateCollector{raft: node, fsm: fsm, reports: reports.Counts, pool: pool.Status, heard: pool.Heard, peers: node.Peers})
	adm := admin.New(admin.Deps{
		Proposer: timed, Reader: fsm, Cluster: clusterAdapter{node}, Backends: backends, Credentials: creds,
		Reports: reports, BackendView: pool.View, BackendHeard: pool.Heard, ProbeBackend: dialProbe,
		BackendStatus: func(id int64) (admin.BackendState, bool) {
			st, ok := pool.Status(id)
			return admin.BackendState{Accepting: st.Accepting, NotAcceptingReason: st.NotAcceptingReason,
				Capacity: st.Capacity, Dispatchable: st.Dispatchable()}, ok
		},
		LastContact: node.LastContact, NewClusterID: dispatch.NewClusterID, LeaderCall: leaderCall,
		Clock: clock, Logger: log.Named("admin"), NodeID: n.NodeID,
		// Writes are decided on current state (DESIGN.md §13.8).
		ReadIndex:    node.ReadIndex,
		LeaderIndex:  node.LeaderIndex,
		HoldDispatch: disp.Hold,
		CaughtUp:     func(index uint64) bool { return node.CaughtUp(index, fsm.State().AppliedIndex()) },
		Published:    fsm.Published,
	})
	optimizeAdmin.Store(adm)
	server, err := rpc.NewServer(n.RPCBind, thrift.WrapProcessor(adm.Processor(), mm.adminMiddleware), rcfg, log.Named("rpc"),
		rpc.WithPolicy(rpc.MasterPolicy()))
	if err == nil {
		err = server.Serve()
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("master: rpc listener: %w", err), node.Shutdown(false))
	}
	mm.reg.MustRegister(metrics.RPCConnections("master", func() (rpc.ConnStats, bool) { return server.ConnStats(), true }))
	httpSrv, err := startHTTP(httpListener{addr: n.HTTPBind, plaintext: n.HTTPAPIPlaintext, certs: rcfg.Certs, maxLag: k.ReadyMaxApplyLag,
		log: log.Named("http"), api: httpapi.Deps{Admin: adm, Reader: fsm, Raft: node, NodeID: n.NodeID, Clock: clock,
			Logger: log.Named("httpapi"), Console: o.Console}}, mm, node, fsm)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("master: http listener: %w", err), server.Close(), node.Shutdown(false))
	}
	log.Info("master serving", zap.String("rpc", server.Addr().String()), zap.String("raft", n.RaftAdvertise))
	started = true
	return &Master{log: log, fsm: fsm, node: node, server: server, admin: adm, reports: reports, pool: pool,
		metrics: mm, http: httpSrv, fwd: fwd}, nil
}

// Close stops the master. With transfer, a leader first hands leadership to
// another master (DESIGN.md §8: SIGTERM), so writes pause for a few
// milliseconds instead of an election timeout.
func (m *Master) Close(transfer bool) error {
	err := m.node.Shutdown(transfer)
	err = errors.Join(err, m.server.Close())
	if m.http != nil {
		err = errors.Join(err, m.http.Close())
	}
	m.fwd.Close()
	return err
}

// Node is the raft node.
func (m *Master) Node() *cluster.Node { return m.node }

// FSM is the journal replica.
func (m *Master) FSM() *raftfsm.FSM { return m.fsm }

// Reports is the report handler (its counters).
func (m *Master) Reports() *report.Handler { return m.reports }

// Pool is the leader-local backend view.
func (m *Master) Pool() *dispatch.Pool { return m.pool }

// Registry is this master's Prometheus registry (what /metrics serves).
func (m *Master) Registry() *prometheus.Registry { return m.metrics.reg }

// HTTPAddr is the HTTP listener's address (metrics, health, the read API
// and the console; "" without http_bind).
func (m *Master) HTTPAddr() string {
	if m.http == nil {
		return ""
	}
	return m.http.Addr()
}

// RPCAddr is the Thrift listener's address.
func (m *Master) RPCAddr() string { return m.server.Addr().String() }

// forwarder carries a follower's command to the leader's forwardApply and
// classifies failures the way cluster.Forwarder's contract asks.
type forwarder struct{ mc *rpc.MasterClient }

func (f forwarder) ForwardApply(ctx context.Context, addr string, cmd []byte) ([]byte, error) {
	out, err := f.mc.ForwardApply(ctx, addr, cmd)
	if err == nil {
		return out, nil
	}
	var ae *adminapi.TAdminError
	switch {
	case errors.As(err, &ae) && ae.GetCode() == adminapi.TErrorCode_NOT_LEADER:
		return nil, fmt.Errorf("forward to %s: %w", addr, raftfsm.ErrNotLeader)
	case rpc.NotSent(err):
		return nil, fmt.Errorf("forward to %s: %w: %w", addr, cluster.ErrNotApplied, err)
	}
	return nil, fmt.Errorf("forward to %s: %w: %w", addr, cluster.ErrFateUnknown, err)
}

// clusterAdapter gives the admin API its view of the raft node.
type clusterAdapter struct{ n *cluster.Node }

func (c clusterAdapter) Leader() (string, string)                 { return c.n.Leader() }
func (c clusterAdapter) ConsistentRead(ctx context.Context) error { return c.n.ConsistentRead(ctx) }
func (c clusterAdapter) ApplyLocal(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	return c.n.ApplyLocal(ctx, cmd)
}

func (c clusterAdapter) Peers() ([]admin.PeerStatus, error) {
	ps, err := c.n.Peers()
	if err != nil {
		return nil, err
	}
	out := make([]admin.PeerStatus, len(ps))
	for i, p := range ps {
		out[i] = admin.PeerStatus(p)
	}
	return out, nil
}

func (c clusterAdapter) TransferLeadership(ctx context.Context, target string) (string, error) {
	if err := c.n.TransferLeadership(target); err != nil {
		return "", err
	}
	id, _ := c.n.Leader()
	return id, nil
}

func (c clusterAdapter) RaftStats() (term, commit, applied uint64) {
	s := c.n.Stats()
	u := func(k string) uint64 { v, _ := strconv.ParseUint(s[k], 10, 64); return v }
	return u("term"), u("commit_index"), u("applied_index")
}

// Operator snapshots and membership changes (admin.SnapshotCluster,
// admin.MembershipCluster).
var (
	_ admin.SnapshotCluster   = clusterAdapter{}
	_ admin.MembershipCluster = clusterAdapter{}
)

func (c clusterAdapter) SaveSnapshot(ctx context.Context) (admin.SnapshotSource, error) {
	f, err := c.n.SaveSnapshot(ctx)
	if err != nil {
		return nil, operatorErr(err)
	}
	return f, nil
}

func (c clusterAdapter) NewSnapshotRestore(size int64) (admin.SnapshotSink, error) {
	u, err := c.n.NewSnapshotRestore(size)
	if err != nil {
		return nil, operatorErr(err)
	}
	return snapshotSink{u}, nil
}

func (c clusterAdapter) AddVoter(ctx context.Context, id, raftAddr, rpcAddr string) error {
	return operatorErr(c.n.AddVoter(ctx, id, raftAddr, rpcAddr))
}

func (c clusterAdapter) RemovePeer(ctx context.Context, id string, force bool) error {
	return operatorErr(c.n.RemovePeer(ctx, id, force))
}

// snapshotSink adapts a cluster restore to admin.SnapshotSink.
type snapshotSink struct{ *cluster.SnapshotRestore }

func (s snapshotSink) Restore(ctx context.Context) (*admin.RestoreResult, error) {
	r, err := s.SnapshotRestore.Restore(ctx)
	if err != nil {
		return nil, operatorErr(err)
	}
	return &admin.RestoreResult{Index: r.Index, SnapshotIndex: r.SnapshotIndex, SnapshotTerm: r.SnapshotTerm,
		Jobs: r.Jobs, Catalogs: r.Catalogs, Backends: r.Backends, CarriedForward: r.CarriedForward, Held: r.Held}, nil
}

// operatorErr marks the cluster's fate classes in the admin API's words.
func operatorErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrFateUnknown):
		return fmt.Errorf("%w: %w", admin.ErrOutcomeUnknown, err)
	case errors.Is(err, cluster.ErrNotApplied):
		return fmt.Errorf("%w: %w", admin.ErrNotApplied, err)
	}
	return err
}

// dialProbe is backends add's probe: one TCP connection to the address,
// closed at once. It proves only that something listens there; the
// heartbeat that follows proves it is a backend of this cluster.
func dialProbe(ctx context.Context, address string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			return op.Err
		}
		return err
	}
	return c.Close()
}
