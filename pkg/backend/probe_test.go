package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// Raw TCP probes against a real agent's Thrift port (issue 5, item 6), run
// by rpctest.ProbeServer: each bad input is rejected or closed, costs the
// server less than rpctest.ProbeAllocLimit, and the agent keeps serving.
// pkg/master/probe_test.go runs the same probes against a master.

// probePanicURI makes the fake runner panic inside inspect_lance_dataset.
const probePanicURI = "/probe/panic.lance"

func TestProbesAgainstTheBackendPort(t *testing.T) {
	cert, pool := rpctest.SelfSignedCert(t)
	cfg := rpc.DefaultConfig()
	cfg.SocketTimeout = rpctest.ProbeSocketTimeout
	tlsCfg := cfg
	tlsCfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	// The test's clients keep the default timeouts.
	client := rpc.DefaultConfig()
	clientTLS := client
	clientTLS.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}

	runner := newFakeRunner()
	runner.setScript(func(_ context.Context, req *frame.Request) Outcome {
		if req.Mode == frame.ModeInspect && req.DatasetURI == probePanicURI {
			panic(rpctest.ProbePanicMarker + " injected runner fault")
		}
		return Outcome{Result: &frame.Result{Protocol: 1, Mode: frame.ModeInspect, OK: true, DatasetVersion: 3}, Proof: ProofChildReaped}
	})
	plain := startHarness(t, testConfig(t), runner, func(c *Config) { c.RPC = cfg })
	secure := startHarness(t, testConfig(t), newFakeRunner(), func(c *Config) { c.RPC = tlsCfg })

	heartbeat := &wire.LanceBackendServiceHeartbeatArgs{Request: &wire.THeartbeatRequest{MasterID: "probe"}}
	valid := func(ctx context.Context, c rpc.Config, addr string) error {
		cl := rpc.NewThriftBackendClient(c)
		hb, err := cl.Heartbeat(ctx, addr, heartbeat.Request)
		if err == nil && hb.GetStatus().GetStatusCode() != wire.TStatusCode_OK {
			err = errors.New("heartbeat answered " + hb.GetStatus().GetStatusCode().String())
		}
		if err != nil {
			return err
		}
		// An inspect too: the panic probe must not have leaked the inspect
		// slot (Concurrency 1: one slot) or the agent's inspect count.
		in, err := cl.Inspect(ctx, addr, &wire.TInspectDatasetRequest{DatasetURI: "/data/db/t.lance"})
		if err == nil && in.GetStatus().GetStatusCode() != wire.TStatusCode_OK {
			err = errors.New("inspect answered " + in.GetStatus().GetStatusCode().String())
		}
		return err
	}

	// ~30-byte frames whose container headers claim 10^8 entries: the
	// heartbeat's master_addresses list<string> (field 3), and a dispatch's
	// storage_options map<string,string> (field 16).
	rpctest.ProbeServer{
		Addr: plain.a.Addr(), TLSAddr: secure.a.Addr(), Config: client, TLSConfig: clientTLS, Valid: valid,
		ValidCall: rpctest.CallMessage(t, "heartbeat", 1, heartbeat),
		ListBomb:  rpctest.ListBombCall("heartbeat", 3, thrift.STRING),
		MapBomb:   rpctest.MapBombCall("submit_lance_index_job", 16, thrift.STRING, thrift.STRING),
		PanicCall: rpctest.CallMessage(t, "inspect_lance_dataset", 1, &wire.LanceBackendServiceInspectLanceDatasetArgs{
			Request: &wire.TInspectDatasetRequest{DatasetURI: probePanicURI}}),
	}.Run(t)

	// The recover middleware logged the panic once, with the method and
	// never the panic value.
	panics := plain.logs.FilterMessageSnippet("panicked").All()
	if len(panics) != 1 || panics[0].ContextMap()["method"] != "inspect_lance_dataset" {
		t.Fatalf("the handler panic was logged %d times (%v), want once with its method", len(panics), panics)
	}
	for _, e := range plain.logs.All() {
		if strings.Contains(e.Message+fmt.Sprint(e.ContextMap()), rpctest.ProbePanicMarker) {
			t.Errorf("the panic value was logged: %q %v", e.Message, e.ContextMap())
		}
	}
}
