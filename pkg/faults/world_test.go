package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/admin"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/masterkit"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

const (
	nMasters  = 3
	nBackends = 3
	// deadlineSecond is the execute deadline the schedules run with; only
	// the world clock's jumps reach it.
	deadlineSecond = 600
)

var tables = []string{"t0", "t1", "t2", "t3"}

// worldClock is the time of every master and backend: the wall clock plus
// an offset the schedule can jump forward (a long outage, a skewed host).
type worldClock struct{ off atomic.Int64 }

func (c *worldClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *worldClock) nowMs() int64            { return c.now().UnixMilli() }
func (c *worldClock) jump(d time.Duration)    { c.off.Add(int64(d)) }
func (c *worldClock) offset() time.Duration   { return time.Duration(c.off.Load()) }
func (c *worldClock) since(t0 time.Time) bool { return c.now().After(t0) }

// world is one schedule's cluster: three masters behind their proxies,
// three backend slots, the ledger, the clock and the fault control.
type world struct {
	t       testing.TB
	seed    int64
	tmp     string
	verbose bool
	clock   *worldClock
	ctl     *control
	ledger  *ledger
	data    *datasets

	realRPC, realRaft           []string // guarded by mu: a bind conflict moves a master (realAddr)
	rpcAdvertise, raftAdvertise []string
	rpcProxies                  []*rpcProxy
	raftProxies                 []*raftProxy
	kit                         *masterkit.Cluster // the masters: configured, started, stopped
	backends                    []*backendSlot

	mu     sync.Mutex
	held   chan struct{} // closed to release held builds; replaced after
	healed bool          // once healed, builds are never held again
	log    []string      // what the schedule did, in order
	t0     time.Time
}

func reservePorts(n int) ([]string, error) {
	ps, err := testkit.ReservePorts(n)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = testkit.Addr(p)
	}
	return out, nil
}

func newWorld(t testing.TB, seed int64, verbose bool) *world {
	w := &world{t: t, seed: seed, tmp: t.TempDir(), verbose: verbose, clock: &worldClock{},
		ctl: newControl(nMasters, uint64(seed)), ledger: newLedger(), data: &datasets{},
		held: make(chan struct{}), t0: time.Now()}
	ports, err := reservePorts(2*nMasters + nBackends)
	if err != nil {
		t.Fatal(err)
	}
	w.realRPC, w.realRaft = ports[:nMasters], ports[nMasters:2*nMasters]
	for i := 0; i < nMasters; i++ {
		rp, err := startRPCProxy(w, i)
		if err != nil {
			t.Fatal(err)
		}
		fp, err := startRaftProxy(w, i)
		if err != nil {
			t.Fatal(err)
		}
		w.rpcProxies, w.raftProxies = append(w.rpcProxies, rp), append(w.raftProxies, fp)
		w.rpcAdvertise, w.raftAdvertise = append(w.rpcAdvertise, rp.addr()), append(w.raftAdvertise, fp.addr())
	}
	var peers []config.Peer
	for i := 0; i < nMasters; i++ {
		peers = append(peers, config.Peer{ID: fmt.Sprintf("m%d", i), RaftAddress: w.raftAdvertise[i], RPCAddress: w.rpcAdvertise[i]})
	}
	// The masters bind their private ports and advertise their proxies'.
	w.kit, err = masterkit.New(masterkit.Config{Dir: t.TempDir(), Peers: peers, StartTimeout: 15 * time.Second,
		Tweak: func(i int, n *config.Node) {
			n.RaftBind, n.RPCBind = w.realRaft[i], w.realRPC[i]
			n.RaftLogStore = w.logStore()
			n.SnapshotThreshold, n.TrailingLogs = 256, 64 // snapshots and installs happen within a schedule
		},
		Options: func(i int) master.Options {
			return master.Options{
				Logger:   w.logger(fmt.Sprintf("m%d", i)),
				Backends: &masterBackends{w: w, idx: i, real: rpc.NewThriftBackendClient(rpc.DefaultConfig())},
				Clock:    w.clock.now,
				Knobs:    &master.Knobs{HeartbeatInterval: 50 * time.Millisecond},
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < nBackends; i++ {
		w.backends = append(w.backends, &backendSlot{w: w, idx: i, addr: ports[2*nMasters+i]})
	}
	return w
}

func (w *world) logger(name string) *zap.Logger {
	if !w.verbose {
		return zap.NewNop()
	}
	return zaptest.NewLogger(w.t, zaptest.Level(zap.WarnLevel)).Named(name)
}

// note appends a line to the schedule's log (printed on failure).
// logStore is the masters' raft log store, a seeded choice: even seeds run
// on boltdb, odd ones on wal, so a replay runs on the same store and every
// run of the schedules covers both. -faults.store puts every schedule on one
// store (a campaign for one of them); the replay line then names it.
func (w *world) logStore() string {
	if *flagStore != "" {
		return *flagStore
	}
	if w.seed%2 != 0 {
		return config.RaftLogStoreWAL
	}
	return config.RaftLogStoreBoltDB
}

// storeFlag is the -faults.store part of a replay command line.
func storeFlag() string {
	if *flagStore == "" {
		return ""
	}
	return " -faults.store=" + *flagStore
}

func (w *world) note(format string, args ...any) {
	line := fmt.Sprintf("%7.3fs  ", time.Since(w.t0).Seconds()) + fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.log = append(w.log, line)
	w.mu.Unlock()
	if w.verbose {
		w.t.Log(line)
	}
}

func (w *world) heldGate() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held
}

// releaseHeld finishes the builds held now; with forever, later ones too.
func (w *world) releaseHeld(forever bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.healed {
		return
	}
	close(w.held)
	w.healed = forever
	if !forever {
		w.held = make(chan struct{})
	}
}

func (w *world) slotOf(addr string) int {
	for i, b := range w.backends {
		if b.addr == addr {
			return i
		}
	}
	return -1
}

// realAddr is where master i really listens (raft or RPC); only the
// proxies know it.
func (w *world) realAddr(i int, raft bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if raft {
		return w.realRaft[i]
	}
	return w.realRPC[i]
}

// startMaster starts master i from its data dir. A bind conflict (a port
// reserved earlier was taken since, e.g. by a parallel schedule) moves the
// master to fresh private ports: the advertised addresses, the proxies',
// stay.
func (w *world) startMaster(i int) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = w.kit.StartMaster(i); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		ports, perr := reservePorts(2)
		if perr != nil {
			return perr
		}
		w.mu.Lock()
		w.realRaft[i], w.realRPC[i] = ports[0], ports[1]
		w.kit.Nodes[i].RaftBind, w.kit.Nodes[i].RPCBind = ports[0], ports[1]
		w.mu.Unlock()
		w.note("m%d moved to raft %s, rpc %s after a bind conflict", i, ports[0], ports[1])
	}
	return err
}

// killMaster closes master i (no leadership transfer: a crash as far as
// the others can tell). A paused master is resumed first so that it can
// stop.
func (w *world) killMaster(i int) {
	m := w.kit.Detach(i)
	if m == nil {
		return
	}
	w.ctl.setPaused(i, false)
	m.Close(false)
}

func (w *world) master(i int) *master.Master { return w.kit.Master(i) }

func (w *world) liveMasters() []int {
	var out []int
	for i := 0; i < nMasters; i++ {
		if w.master(i) != nil {
			out = append(out, i)
		}
	}
	return out
}

// leader returns the master that leads with a completed barrier, or -1.
func (w *world) leader() int {
	for i := 0; i < nMasters; i++ {
		if m := w.master(i); m != nil && !w.ctl.isPaused(i) && m.Node().LeaderTerm() != 0 {
			return i
		}
	}
	return -1
}

// await polls cond until it holds or timeout passes (testkit.Poll).
func await(timeout time.Duration, cond func() bool) bool { return testkit.Poll(timeout, cond) }

func (w *world) awaitLeader(timeout time.Duration) int {
	l := -1
	await(timeout, func() bool { l = w.leader(); return l >= 0 })
	return l
}

func (w *world) client(i int) *rpc.MasterClient {
	return rpc.NewMasterClient([]string{w.rpcAdvertise[i]}, rpc.DefaultConfig(), zap.NewNop())
}

func (w *world) call(i int, timeout time.Duration, fn func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return w.client(i).Call(ctx, fn)
}

// setup registers the catalog, the backends and the options through the
// leader, and waits until the leader hears every backend.
func (w *world) setup() {
	t := w.t
	for i := 0; i < nMasters; i++ {
		if err := w.startMaster(i); err != nil {
			t.Fatalf("start m%d: %v", i, err)
		}
	}
	for _, b := range w.backends {
		// One in three backends forgets finished invocations shortly after
		// their deadline (Config.Grace), as a seeded choice. Not yet
		// registered, a backend whose reserved port was taken moves.
		forgetful := (w.seed+int64(b.idx))%3 == 0
		err := b.start(-1, forgetful)
		for attempt := 0; err != nil && strings.Contains(err.Error(), "address already in use") && attempt < 5; attempt++ {
			ports, perr := reservePorts(1)
			if perr != nil {
				t.Fatal(perr)
			}
			b.mu.Lock()
			b.addr = ports[0]
			b.mu.Unlock()
			err = b.start(len(b.dirs)-1, forgetful)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	l := w.awaitLeader(20 * time.Second)
	if l < 0 {
		t.Fatal("no leader")
	}
	opts := map[string]string{
		options.OptMaxUnresolvedGlobal: "100000", options.OptMaxUnresolvedPerCatalog: "100000", options.OptMaxUnresolvedPerTable: "100000",
		options.OptDispatchIntervalSecond: "1", options.OptExecuteDeadlineSecond: strconv.Itoa(deadlineSecond),
	}
	// Each write is retried while the cluster settles its first leader
	// (NOT_LEADER, UNAVAILABLE, an unknown outcome, a transport error); a
	// repeated one is harmless or answers "already exists".
	root := "s3://lake/root"
	var writes []func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error
	for _, b := range w.backends {
		writes = append(writes, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.AddBackend(ctx, b.addr, "")
			return err
		})
	}
	for k, v := range opts {
		writes = append(writes, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.SetOption(ctx, k, v, "")
			return err
		})
	}
	do := func(write func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error) {
		var err error
		for attempt := 0; attempt < 50; attempt++ {
			if l = w.awaitLeader(10 * time.Second); l < 0 {
				continue
			}
			err = w.call(l, 10*time.Second, write)
			var ae *adminapi.TAdminError
			if err == nil || (errors.As(err, &ae) && ae.GetCode() == adminapi.TErrorCode_ALREADY_EXISTS && attempt > 0) {
				err = nil
				break
			}
			if errors.As(err, &ae) && ae.GetCode() != adminapi.TErrorCode_NOT_LEADER && ae.GetCode() != adminapi.TErrorCode_UNAVAILABLE &&
				ae.GetCode() != adminapi.TErrorCode_OUTCOME_UNKNOWN {
				break // a definitive refusal
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	for _, write := range writes {
		do(write)
	}
	if !await(20*time.Second, func() bool { return w.allBackendsAlive() }) {
		t.Fatal("the leader never heard every backend")
	}
	// The catalog last: its object store is vouched for by a live backend.
	do(func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		_, err := c.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root}, "")
		return err
	})
}

// allBackendsAlive: the current leader's pool has an OK heartbeat from
// every registered backend.
func (w *world) allBackendsAlive() bool {
	l := w.leader()
	if l < 0 {
		return false
	}
	m := w.master(l)
	bs := m.FSM().State().Backends()
	if len(bs) != nBackends {
		return false
	}
	for _, b := range bs {
		if alive, _, _ := m.Pool().View(b.ID); !alive {
			return false
		}
	}
	return true
}

// admit sends one CREATE INDEX (BTREE) through master via; it returns the
// job id when the master acknowledged it, and whether the fate is known.
func (w *world) admit(via int, table, name string, timeout time.Duration) (int64, error) {
	var id int64
	err := w.call(via, timeout, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		resp, err := c.CreateIndex(ctx, &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: table,
			IndexName: name, Column: "id", IndexType: "BTREE"})
		if err == nil {
			id = resp.GetJobID()
		}
		return err
	})
	return id, err
}

// setOption sets one cluster option through master via.
func (w *world) setOption(via int, key, value string) error {
	return w.call(via, 10*time.Second, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		_, err := c.SetOption(ctx, key, value, "")
		return err
	})
}

func (w *world) saveSnapshot(via int) ([]byte, error) {
	var buf bytes.Buffer
	err := w.call(via, 20*time.Second, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		_, err := admin.DownloadSnapshot(ctx, c, &buf, func() error { buf.Reset(); return nil })
		return err
	})
	return buf.Bytes(), err
}

func (w *world) restoreSnapshot(via int, file []byte) error {
	return w.call(via, 10*time.Second, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		_, err := admin.UploadSnapshot(ctx, c, bytes.NewReader(file), int64(len(file)), "")
		return err
	})
}

// teardown stops everything: the control first (nothing stays paused),
// then held builds, backends, masters, proxies.
func (w *world) teardown() {
	w.ctl.close()
	w.releaseHeld(true)
	var wg sync.WaitGroup
	for _, b := range w.backends {
		wg.Add(1)
		go func() { defer wg.Done(); b.crash() }()
	}
	wg.Wait()
	for i := 0; i < nMasters; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); w.killMaster(i) }()
	}
	wg.Wait()
	for i := range w.rpcProxies {
		w.rpcProxies[i].close()
		w.raftProxies[i].close()
	}
}

// states returns every live master's replica.
func (w *world) states() map[int]*raftfsm.State {
	out := map[int]*raftfsm.State{}
	for _, i := range w.liveMasters() {
		out[i] = w.master(i).FSM().State()
	}
	return out
}
