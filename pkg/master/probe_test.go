package master_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/master"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// Raw TCP probes against a real master's Thrift port (issue 5, item 6), run
// by rpctest.ProbeServer: each bad input is rejected or closed, costs the
// server less than rpctest.ProbeAllocLimit, and the master keeps serving.
// pkg/backend/probe_test.go runs the same probes against a backend agent.

// probePanicRef is a credentials reference whose resolution panics: an
// inspect of a dataset of a catalog naming it panics in the handler.
const probePanicRef = "probe-panic"

// panickyCredentials resolves probePanicRef by panicking.
type panickyCredentials struct{}

func (panickyCredentials) Resolve(ref string) (map[string]string, error) {
	if ref == probePanicRef {
		panic(rpctest.ProbePanicMarker + " injected credentials fault")
	}
	return nil, nil
}

// startProbeMaster starts a one-master cluster; it elects itself (awaitLead).
func startProbeMaster(t *testing.T, rcfg rpc.Config, log *zap.Logger) *master.Master {
	t.Helper()
	ports := freePorts(t, 2)
	n := config.DefaultNode()
	n.NodeID, n.DataDir, n.Timeouts = "m1", t.TempDir(), config.RaftProfileFast
	n.Peers = []config.Peer{{ID: "m1", RaftAddress: "127.0.0.1:" + strconv.Itoa(ports[0]), RPCAddress: "127.0.0.1:" + strconv.Itoa(ports[1])}}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpctest.ProbeGuard)
	defer cancel()
	m, err := master.Start(ctx, master.Options{Node: n, Logger: log, RPC: rcfg, Credentials: panickyCredentials{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(false) })
	return m
}

func awaitLead(t *testing.T, ms ...*master.Master) {
	t.Helper()
	eventually(t, rpctest.ProbeGuard, "the masters to lead", func() bool {
		for _, m := range ms {
			if m.Node().LeaderTerm() == 0 {
				return false
			}
		}
		return true
	})
}

func TestProbesAgainstTheMasterPort(t *testing.T) {
	cert, pool := rpctest.SelfSignedCert(t)
	cfg := rpc.DefaultConfig()
	cfg.SocketTimeout = rpctest.ProbeSocketTimeout
	// The TLS master's config serves its certificate and, as a client,
	// trusts it (its own clients use the same config).
	tlsCfg := cfg
	tlsCfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	// The test's clients keep the default timeouts: a slow fsync on a busy
	// machine must not fail a valid call.
	client := rpc.DefaultConfig()
	clientTLS := client
	clientTLS.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}

	core, logs := observer.New(zap.ErrorLevel)
	plain := startProbeMaster(t, cfg, zap.New(core))
	secure := startProbeMaster(t, tlsCfg, zap.NewNop())
	awaitLead(t, plain, secure)

	valid := func(ctx context.Context, c rpc.Config, addr string) error {
		return rpc.NewMasterClient([]string{addr}, c, zap.NewNop()).Call(ctx, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
			opts, err := cl.ListOptions(ctx)
			if err == nil && len(opts) == 0 {
				err = errors.New("no options listed")
			}
			return err
		})
	}
	// The panic probe's fixture: a backend (inspect needs one registered)
	// and a catalog whose credentials reference panics when resolved.
	backend := rpctest.NewFakeBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), rpctest.ProbeGuard)
	defer cancel()
	err := rpc.NewMasterClient([]string{plain.RPCAddr()}, client, zap.NewNop()).Call(ctx, func(ctx context.Context, cl *adminapi.LanceMasterServiceClient) error {
		root, ref := "/data/boom", probePanicRef
		if _, err := cl.CreateCatalog(ctx, &adminapi.TCatalog{Name: "boom", RootURI: &root, CredentialsRef: &ref}, ""); err != nil {
			return err
		}
		_, err := cl.AddBackend(ctx, backend.Addr(), "")
		return err
	})
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}

	// ~30-byte frames whose container headers claim 10^8 entries: a
	// createIndex request's properties list<TProperty> (field 7), and a
	// map<string,string> in an unknown field of the same request (the admin
	// API has no map argument; the reader skips unknown fields, which reads
	// the map's header just the same).
	entries := plain.FSM().State().AppliedIndex()
	rpctest.ProbeServer{
		Addr: plain.RPCAddr(), TLSAddr: secure.RPCAddr(), Config: client, TLSConfig: clientTLS, Valid: valid,
		ValidCall: rpctest.CallMessage(t, "listOptions", 1, &adminapi.LanceMasterServiceListOptionsArgs{}),
		ListBomb:  rpctest.ListBombCall("createIndex", 7, thrift.STRUCT),
		MapBomb:   rpctest.MapBombCall("createIndex", 99, thrift.STRING, thrift.STRING),
		PanicCall: rpctest.CallMessage(t, "inspectDataset", 1, &adminapi.LanceMasterServiceInspectDatasetArgs{Catalog: "boom", Db: "db", Table: "t"}),
	}.Run(t)

	// Nothing was journaled by the probes.
	if got := plain.FSM().State().AppliedIndex(); got != entries {
		t.Errorf("the probes journaled %d entries", got-entries)
	}
	// The recover middleware logged the panic once, with the method and
	// never the panic value.
	panics := logs.FilterMessageSnippet("panicked").All()
	if len(panics) != 1 || panics[0].ContextMap()["method"] != "inspectDataset" {
		t.Fatalf("the handler panic was logged %d times (%v), want once with its method", len(panics), panics)
	}
	for _, e := range logs.All() {
		if strings.Contains(e.Message+fmt.Sprint(e.ContextMap()), rpctest.ProbePanicMarker) {
			t.Errorf("the panic value was logged: %q %v", e.Message, e.ContextMap())
		}
	}
}
