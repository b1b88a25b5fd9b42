package admin

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"
)

// serveAdmin serves h's admin API over Thrift on loopback.
func serveAdmin(t *testing.T, h *harness) string {
	t.Helper()
	cfg := rpc.DefaultConfig()
	cfg.SocketTimeout = 2 * time.Second
	return serveAdminWith(t, h, cfg)
}

// serveAdminWith serves h's admin API with cfg (mutual TLS, say) and opts.
func serveAdminWith(t *testing.T, h *harness, cfg rpc.Config, opts ...rpc.ServerOption) string {
	t.Helper()
	return serveServerWith(t, h.srv, cfg, opts...)
}

// serveServerWith serves s's admin API with cfg and opts on loopback.
func serveServerWith(t *testing.T, s *Server, cfg rpc.Config, opts ...rpc.ServerOption) string {
	t.Helper()
	srv, err := rpc.NewServer("127.0.0.1:0", s.Processor(), cfg, zap.NewNop(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}

func call(t *testing.T, addr string, fn func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return rpc.NewMasterClient([]string{addr}, rpc.DefaultConfig(), zap.NewNop()).Call(ctx, fn)
}

// Bad input on the admin API: typed errors, no entry, the process alive.
func TestBadInputOverThrift(t *testing.T) {
	h := newHarness(t)
	addr := serveAdmin(t, h)
	before := h.prop.Index()

	typed := []struct {
		name string
		fn   func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error
		want adminapi.TErrorCode
	}{
		{"unknown option key", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.SetOption(ctx, "lance_index_job_no_such_option", "1", "")
			return err
		}, adminapi.TErrorCode_INVALID},
		{"get unknown option", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.GetOption(ctx, strings.Repeat("k", 5000))
			return err
		}, adminapi.TErrorCode_INVALID},
		{"zero option", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.SetOption(ctx, "lance_index_job_max_dispatch_per_round", "0", "")
			return err
		}, adminapi.TErrorCode_INVALID},
		{"negative option", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.SetOption(ctx, "lance_index_job_dispatch_interval_second", "-5", "")
			return err
		}, adminapi.TErrorCode_INVALID},
		{"non-numeric option", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.SetOption(ctx, "lance_index_job_max_unresolved_global", "lots", "")
			return err
		}, adminapi.TErrorCode_INVALID},
		{"bad bool option", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.SetOption(ctx, "enable_lance_index_mutation", "maybe", "")
			return err
		}, adminapi.TErrorCode_INVALID},
		{"oversized index name", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.CreateIndex(ctx, createReq("items", strings.Repeat("n", job.MaxNameBytes*4), "id", "BTREE"))
			return err
		}, adminapi.TErrorCode_INVALID},
		{"oversized catalog root", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c", RootURI: strp("/" + strings.Repeat("r", job.MaxURIBytes+1))}, "")
			return err
		}, adminapi.TErrorCode_INVALID},
		{"invalid utf-8 name", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.CreateIndex(ctx, createReq("items", "bad\xff\xfe", "id", "BTREE"))
			return err
		}, adminapi.TErrorCode_INVALID},
		{"bad backend address", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.AddBackend(ctx, "no-port", "")
			return err
		}, adminapi.TErrorCode_INVALID},
		{"backend port out of range", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.AddBackend(ctx, "127.0.0.1:70000", "")
			return err
		}, adminapi.TErrorCode_INVALID},
		{"remove unknown backend", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			return c.RemoveBackend(ctx, "10.1.2.3:1", "")
		}, adminapi.TErrorCode_NOT_FOUND},
		{"nil request", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.ResolveJob(ctx, &adminapi.TResolveRequest{JobID: -1, ForceRelease: true, Comment: "x"})
			return err
		}, adminapi.TErrorCode_NOT_FOUND},
		{"list limit too large", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			n := int32(1 << 20)
			_, err := c.ListJobs(ctx, &adminapi.TListJobsRequest{Limit: &n})
			return err
		}, adminapi.TErrorCode_INVALID},
		{"unknown state filter", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			s := "SLEEPING"
			_, err := c.ListJobs(ctx, &adminapi.TListJobsRequest{State: &s})
			return err
		}, adminapi.TErrorCode_INVALID},
		{"show missing job", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.ShowJob(ctx, 12345, false)
			return err
		}, adminapi.TErrorCode_NOT_FOUND},
		{"forwarded garbage command", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.ForwardApply(ctx, []byte{0x7f, 1, 2, 3})
			return err
		}, adminapi.TErrorCode_INVALID},
		{"forwarded dispatch-lifecycle command", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			cmd, err := raftfsm.Encode(raftfsm.CmdGC, &journal.TGCCommand{NowMs: 1, CutoffMs: 1 << 62, JobIds: []int64{1}})
			if err != nil {
				return err
			}
			_, err = c.ForwardApply(ctx, cmd)
			return err
		}, adminapi.TErrorCode_INVALID},
		{"forwarded empty command", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.ForwardApply(ctx, nil)
			return err
		}, adminapi.TErrorCode_INVALID},
		{"transfer to an unknown peer", func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.TransferLeader(ctx, "no-such-peer", "")
			return err
		}, adminapi.TErrorCode_NOT_FOUND},
	}
	for _, c := range typed {
		err := call(t, addr, c.fn)
		if got := errCode(t, err); got != c.want {
			t.Errorf("%s: code %s (%v); want %s", c.name, got, err, c.want)
		}
	}

	// Raw probes: a huge length prefix, garbage, a frame claiming 10^8 list
	// entries, a partial frame. Each is closed; none allocates or crashes.
	probes := [][]byte{
		{0xff, 0xff, 0xff, 0xff},
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		rpctest.Frame(rpctest.ListBombCall("createIndex", 7, thrift.STRUCT)), // properties list<TProperty>
		{0, 0, 0, 50, 0x80, 0x01},
	}
	for _, p := range probes {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(p)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		for {
			if _, err := conn.Read(buf); err != nil {
				break // closed by the server (or our deadline for the partial frame)
			}
		}
		conn.Close()
	}

	if h.prop.Index() != before {
		t.Fatalf("bad input journaled %d entries", h.prop.Index()-before)
	}
	// The server still serves.
	if err := call(t, addr, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
		opts, err := c.ListOptions(ctx)
		if err == nil && len(opts) == 0 {
			t.Error("no options listed")
		}
		return err
	}); err != nil {
		t.Fatalf("server no longer serves: %v", err)
	}
}
