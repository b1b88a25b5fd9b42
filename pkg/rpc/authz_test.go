package rpc

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/certs"
)

// policyMaster answers the few admin methods these tests call as allowed; any
// other method panics (nil embedded interface), which the recover
// middleware answers INTERNAL_ERROR: a refused call never gets there.
type policyMaster struct {
	adminapi.LanceMasterService
}

func (policyMaster) CreateIndex(context.Context, *adminapi.TCreateIndexRequest) (*adminapi.TAdmitResponse, error) {
	id := int64(7)
	return &adminapi.TAdmitResponse{JobID: &id}, nil
}

func (policyMaster) ForwardApply(_ context.Context, cmd []byte) ([]byte, error) { return cmd, nil }

func (policyMaster) ListOptions(context.Context) ([]*adminapi.TOption, error) {
	return []*adminapi.TOption{{Key: "k", Value: "v"}}, nil
}

func (policyMaster) ReportLanceIndexJobResult_(context.Context, *wire.TLanceIndexJobReport) (*wire.TStatus, error) {
	return okStatus(), nil
}

func startPolicyMaster(t *testing.T, cfg Config) string {
	t.Helper()
	return startServerOpts(t, adminapi.NewLanceMasterServiceProcessor(policyMaster{}), cfg, WithPolicy(MasterPolicy())).Addr().String()
}

func adminCode(err error) adminapi.TErrorCode {
	var ae *adminapi.TAdminError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return -1
}

// asRole runs fn on one connection to a master with role's certificate.
func asRole(t *testing.T, pki *testPKI, role certs.Role, addr string, fn func(ctx context.Context, c *adminapi.LanceMasterServiceClient)) {
	t.Helper()
	conn, err := DialRole(testCtx(t), addr, pki.roleConfig(role), certs.RoleMaster)
	if err != nil {
		t.Fatalf("dial as %s: %v", role, err)
	}
	defer conn.Close()
	fn(testCtx(t), adminapi.NewLanceMasterServiceClient(conn.Client()))
}

func TestAuthorizationTable(t *testing.T) {
	pki := newTestPKI(t)
	master := startPolicyMaster(t, pki.roleConfig(certs.RoleMaster))
	report := &wire.TLanceIndexJobReport{JobID: 1, DispatchRevision: 1, InvocationID: "i", BeProcessEpoch: 1, InvocationSecret: new("s")}
	create := &adminapi.TCreateIndexRequest{Catalog: "c", Db: "d", Table: "t", IndexName: "i", Column: "x", IndexType: "BTREE"}

	t.Run("operator may mutate, not forward or report", func(t *testing.T) {
		asRole(t, pki, certs.RoleOperator, master, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) {
			if r, err := c.CreateIndex(ctx, create); err != nil || r.GetJobID() != 7 {
				t.Fatalf("operator createIndex: %v, %v", r, err)
			}
			if _, err := c.ForwardApply(ctx, []byte("cmd")); adminCode(err) != adminapi.TErrorCode_PERMISSION_DENIED {
				t.Fatalf("operator forwardApply: %v", err)
			}
			st, err := c.ReportLanceIndexJobResult_(ctx, report)
			if err != nil || st.StatusCode != wire.TStatusCode_NOT_AUTHORIZED {
				t.Fatalf("operator report: %v, %v", st, err)
			}
			// The connection still serves after the refusals.
			if opts, err := c.ListOptions(ctx); err != nil || len(opts) != 1 {
				t.Fatalf("operator listOptions after refusals: %v, %v", opts, err)
			}
		})
	})
	t.Run("backend may report only", func(t *testing.T) {
		asRole(t, pki, certs.RoleBackend, master, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) {
			_, err := c.CreateIndex(ctx, create)
			if adminCode(err) != adminapi.TErrorCode_PERMISSION_DENIED || !strings.Contains(err.Error(), "a backend certificate may not call LanceMasterService.createIndex") {
				t.Fatalf("backend createIndex: %v", err)
			}
			if st, err := c.ReportLanceIndexJobResult_(ctx, report); err != nil || st.StatusCode != wire.TStatusCode_OK {
				t.Fatalf("backend report: %v, %v", st, err)
			}
			if _, err := c.ListOptions(ctx); adminCode(err) != adminapi.TErrorCode_PERMISSION_DENIED {
				t.Fatalf("backend listOptions: %v", err)
			}
		})
	})
	t.Run("master may forward, report and read, not mutate", func(t *testing.T) {
		asRole(t, pki, certs.RoleMaster, master, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) {
			if out, err := c.ForwardApply(ctx, []byte("cmd")); err != nil || string(out) != "cmd" {
				t.Fatalf("master forwardApply: %q, %v", out, err)
			}
			if st, err := c.ReportLanceIndexJobResult_(ctx, report); err != nil || st.StatusCode != wire.TStatusCode_OK {
				t.Fatalf("master report: %v, %v", st, err)
			}
			if _, err := c.ListOptions(ctx); err != nil {
				t.Fatalf("master listOptions: %v", err)
			}
			if _, err := c.CreateIndex(ctx, create); adminCode(err) != adminapi.TErrorCode_PERMISSION_DENIED {
				t.Fatalf("master createIndex: %v", err)
			}
		})
	})
	t.Run("only masters call backends", func(t *testing.T) {
		backend := startTLSBackend(t, &testBackend{}, pki.roleConfig(certs.RoleBackend)).Addr().String()
		d := testDispatch("inv")
		if st, err := NewThriftBackendClient(pki.roleConfig(certs.RoleMaster)).Submit(testCtx(t), backend, d); err != nil || st.StatusCode != wire.TStatusCode_OK {
			t.Fatalf("master submit: %v, %v", st, err)
		}
		for _, r := range []certs.Role{certs.RoleOperator, certs.RoleBackend} {
			st, err := NewThriftBackendClient(pki.roleConfig(r)).Submit(testCtx(t), backend, d)
			if err != nil || st.StatusCode != wire.TStatusCode_NOT_AUTHORIZED {
				t.Fatalf("%s submit: %v, %v", r, st, err)
			}
			hb, err := tlsHeartbeat(t, pki.roleConfig(r), backend)
			if err != nil || hb.GetStatus().GetStatusCode() != wire.TStatusCode_NOT_AUTHORIZED || hb.BeProcessEpoch != 0 {
				t.Fatalf("%s heartbeat: %v, %v", r, hb, err)
			}
		}
	})
	t.Run("the policy table", func(t *testing.T) {
		mp, bp := MasterPolicy(), BackendPolicy()
		for _, tc := range []struct {
			p      *Policy
			role   certs.Role
			method string
			want   bool
		}{
			{mp, certs.RoleOperator, "removePeer", true},
			{mp, certs.RoleOperator, "readSnapshotChunk", true},
			{mp, certs.RoleMaster, "readSnapshotChunk", false},
			{mp, certs.RoleMaster, "listBackends", true},
			{mp, certs.RoleMaster, "reportLanceIndexJobTermination", true},
			{mp, certs.RoleBackend, "reportLanceIndexJobTermination", true},
			{mp, certs.RoleBackend, "listBackends", false},
			{mp, certs.RoleOperator, "forwardApply", false},
			{mp, "", "listJobs", false},
			{bp, certs.RoleMaster, "query_lance_index_invocations", true},
			{bp, certs.RoleOperator, "inspect_lance_dataset", false},
			{bp, certs.RoleBackend, "heartbeat", false},
		} {
			if got := tc.p.Allows(tc.role, tc.method); got != tc.want {
				t.Errorf("%s may call %s: %v, want %v", tc.role, tc.method, got, tc.want)
			}
		}
	})
}

// Every method of both services refuses a caller whose certificate carries
// no role, with the refusal its generated client decodes: PERMISSION_DENIED
// for the admin methods, NOT_AUTHORIZED for the status-answering ones.
// Driven by reflection over the generated clients, so a method added to the
// IDL is covered.
func TestEveryMethodRefusesACallerWithoutARole(t *testing.T) {
	pki := newTestPKI(t)
	master := startPolicyMaster(t, pki.roleConfig(certs.RoleMaster))
	backend := startTLSBackend(t, &testBackend{}, pki.roleConfig(certs.RoleBackend)).Addr().String()
	nobody := pki.config(pki.issue("nobody", certs.Leaf{Server: true, Hosts: []string{"127.0.0.1"}, Validity: time.Hour}))

	for _, svc := range []struct {
		addr    string
		policy  *Policy
		newConn func(c *Conn) any
	}{
		{master, MasterPolicy(), func(c *Conn) any { return adminapi.NewLanceMasterServiceClient(c.Client()) }},
		{backend, BackendPolicy(), func(c *Conn) any { return wire.NewLanceBackendServiceClient(c.Client()) }},
	} {
		conn, err := Dial(testCtx(t), svc.addr, nobody)
		if err != nil {
			t.Fatal(err)
		}
		client := reflect.ValueOf(svc.newConn(conn))
		called := 0
		for i := 0; i < client.NumMethod(); i++ {
			m := client.Type().Method(i)
			mt := m.Type
			if mt.NumIn() < 2 || mt.In(1) != reflect.TypeFor[context.Context]() {
				continue // Client(), LastResponseMeta_(), ...
			}
			args := []reflect.Value{client, reflect.ValueOf(testCtx(t))}
			for a := 2; a < mt.NumIn(); a++ {
				in := mt.In(a)
				if in.Kind() == reflect.Pointer {
					args = append(args, reflect.New(in.Elem()))
				} else {
					args = append(args, reflect.Zero(in))
				}
			}
			out := m.Func.Call(args)
			called++
			err, _ := out[len(out)-1].Interface().(error)
			if adminCode(err) == adminapi.TErrorCode_PERMISSION_DENIED {
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", m.Name, err)
				continue
			}
			if st := statusOf(out[0].Interface()); st == nil || st.StatusCode != wire.TStatusCode_NOT_AUTHORIZED {
				t.Errorf("%s answered %v, want a refusal", m.Name, out[0].Interface())
			}
		}
		conn.Close()
		if called != len(svc.policy.Methods()) {
			t.Errorf("called %d methods; the policy has %d", called, len(svc.policy.Methods()))
		}
	}
}

// statusOf is v itself when it is a *wire.TStatus, else its Status field.
func statusOf(v any) *wire.TStatus {
	if st, ok := v.(*wire.TStatus); ok {
		return st
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil
	}
	f := rv.Elem().FieldByName("Status")
	if !f.IsValid() {
		return nil
	}
	st, _ := f.Interface().(*wire.TStatus)
	return st
}

func TestPolicyMustMatchTheProcessor(t *testing.T) {
	_, err := NewServer("127.0.0.1:0", adminapi.NewLanceMasterServiceProcessor(policyMaster{}), DefaultConfig(), zaptest.NewLogger(t), WithPolicy(BackendPolicy()))
	if err == nil || !strings.Contains(err.Error(), "createIndex") {
		t.Fatalf("a backend policy on the master's processor: %v", err)
	}
	for _, p := range []struct {
		p    *Policy
		want []string
	}{{MasterPolicy(), slices.Sorted(func(yield func(string) bool) {
		for m := range adminapi.NewLanceMasterServiceProcessor(policyMaster{}).ProcessorMap() {
			if !yield(m) {
				return
			}
		}
	})}} {
		if got := p.p.Methods(); !slices.Equal(got, p.want) {
			t.Fatalf("policy methods %v, processor %v", got, p.want)
		}
	}
}

func TestMasterClientWantsAMaster(t *testing.T) {
	pki := newTestPKI(t)
	// A backend-role server where the CLI expects a master: refused before
	// any byte is sent, so the client moves on.
	backend := startTLSBackend(t, &testBackend{}, pki.roleConfig(certs.RoleBackend)).Addr().String()
	err := NewMasterClient([]string{backend}, pki.roleConfig(certs.RoleOperator), zap.NewNop()).Call(testCtx(t),
		func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
			_, err := c.ListOptions(ctx)
			return err
		})
	if !errors.Is(err, ErrNoMaster) || !NotSent(err) || !strings.Contains(err.Error(), "has role backend") {
		t.Fatalf("operator to a backend: %v", err)
	}
}
