package rpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/certs"
)

// Authorization (docs/rpc.md): with mutual TLS, every call is checked
// against a Policy before its arguments are decoded. The caller's role comes
// from its verified client certificate (certs.RoleOf), read once per
// connection. A refused call is answered with a typed refusal in the
// method's own result type (below) and the connection keeps serving.
//
// Without TLS, or with TLS that does not verify client certificates, there
// is no authorization at all: anyone who reaches the port may call
// everything. Plaintext is for loopback demos only.

// Policy says which roles may call each method of one Thrift service, and
// how a refused call is answered.
type Policy struct {
	service string
	rules   map[string]rule
}

type rule struct {
	roles []certs.Role
	// refuse builds the refusal: the result struct's field id and name,
	// and its value.
	refuse func(msg string) (id int16, name string, v thrift.TStruct)
}

// Methods lists the methods the policy covers, sorted.
func (p *Policy) Methods() []string {
	out := make([]string, 0, len(p.rules))
	for m := range p.rules {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Allows reports whether role may call method.
func (p *Policy) Allows(role certs.Role, method string) bool {
	r, ok := p.rules[method]
	return ok && role != "" && slices.Contains(r.roles, role)
}

// check fails unless the policy names exactly the processor's methods: a
// method added to the IDL must be placed in the table before it can be
// served, and a typo in the table fails at start-up.
func (p *Policy) check(proc thrift.TProcessor) error {
	var missing, extra []string
	served := proc.ProcessorMap()
	for m := range served {
		if _, ok := p.rules[m]; !ok {
			missing = append(missing, m)
		}
	}
	for m := range p.rules {
		if _, ok := served[m]; !ok {
			extra = append(extra, m)
		}
	}
	if len(missing)+len(extra) == 0 {
		return nil
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return fmt.Errorf("rpc: the %s authorization policy does not match the processor (not in the policy: %v; not served: %v)",
		p.service, missing, extra)
}

// Refusals. Admin methods declare `throws (1: TAdminError err)`: a refusal
// is that exception with code PERMISSION_DENIED. The report methods and the
// backend's methods answer a TStatus (or a response whose field 1 is one):
// a refusal is status NOT_AUTHORIZED, which their callers already treat as
// "not accepted" (a backend keeps the report in its outbox and retries; a
// dispatch counts as never enqueued; a heartbeat as a dead backend).
func refuseAdmin(msg string) (int16, string, thrift.TStruct) {
	return 1, "err", &adminapi.TAdminError{Code: adminapi.TErrorCode_PERMISSION_DENIED, Message: msg}
}

func notAuthorized(msg string) *wire.TStatus {
	return &wire.TStatus{StatusCode: wire.TStatusCode_NOT_AUTHORIZED, ErrorMsgs: []string{msg}}
}

func refuseStatus(msg string) (int16, string, thrift.TStruct) {
	return 0, "success", notAuthorized(msg)
}

func refuseHeartbeat(msg string) (int16, string, thrift.TStruct) {
	return 0, "success", &wire.THeartbeatResponse{Status: notAuthorized(msg)}
}

func refuseInspect(msg string) (int16, string, thrift.TStruct) {
	return 0, "success", &wire.TInspectDatasetResponse{Status: notAuthorized(msg)}
}

func refuseQuery(msg string) (int16, string, thrift.TStruct) {
	return 0, "success", &wire.TQueryInvocationsResponse{Status: notAuthorized(msg)}
}

func refuseResolve(msg string) (int16, string, thrift.TStruct) {
	return 0, "success", &wire.TResolveJobResponse{Status: notAuthorized(msg)}
}

func refuseJobLog(msg string) (int16, string, thrift.TStruct) {
	return 0, "success", &wire.TJobLogResponse{Status: notAuthorized(msg)}
}

func refuseProbe(msg string) (int16, string, thrift.TStruct) {
	return 0, "success", &wire.TProbeStoreResponse{Status: notAuthorized(msg)}
}

// The master's methods by class (docs/rpc.md, the authorization table).
var (
	// masterReadMethods read the journal or the cluster; masters may call
	// them too (a follower asks the leader for listBackends and showBackend).
	masterReadMethods = []string{
		"listJobs", "showJob", "jobLogs", "inspectDataset", "listCatalogs", "listBackends", "showBackend",
		"getOption", "listOptions", "listPeers", "raftHealth", "raftMemberStatus", "listEvents",
	}
	// masterOperatorMethods change the cluster, or export all of it (a
	// snapshot holds the whole journal): operators only.
	masterOperatorMethods = []string{
		"createIndex", "dropIndex", "optimizeDataset", "resolveJob", "cancelJob",
		"createCatalog", "updateCatalog", "removeCatalog",
		"addBackend", "removeBackend", "drainBackend", "setOption", "transferLeader",
		"beginSnapshotSave", "readSnapshotChunk", "beginSnapshotRestore", "writeSnapshotChunk",
		"finishSnapshotRestore", "abortSnapshotTransfer",
		"addVoter", "removePeer", "promote",
	}
	// masterReportMethods: backends report; followers forward reports to
	// the leader. The invocation secret authenticates each report as well.
	masterReportMethods = []string{"reportLanceIndexJobResult", "reportLanceIndexJobTermination", "reportLanceIndexJobProgress"}
)

// MasterPolicy is the authorization of LanceMasterService:
//   - operator: every admin method, reading and changing; not forwardApply
//     (raw journal commands, past every admission check) and not the
//     reports (a backend's);
//   - master: forwardApply, the reports (forwarded by followers) and the
//     read methods;
//   - backend: the reports only.
func MasterPolicy() *Policy {
	p := &Policy{service: "LanceMasterService", rules: map[string]rule{}}
	for _, m := range masterReadMethods {
		p.rules[m] = rule{roles: []certs.Role{certs.RoleOperator, certs.RoleMaster}, refuse: refuseAdmin}
	}
	for _, m := range masterOperatorMethods {
		p.rules[m] = rule{roles: []certs.Role{certs.RoleOperator}, refuse: refuseAdmin}
	}
	p.rules["forwardApply"] = rule{roles: []certs.Role{certs.RoleMaster}, refuse: refuseAdmin}
	for _, m := range masterReportMethods {
		p.rules[m] = rule{roles: []certs.Role{certs.RoleBackend, certs.RoleMaster}, refuse: refuseStatus}
	}
	return p
}

// BackendPolicy is the authorization of LanceBackendService: masters may
// call its seven methods; nobody else may call anything.
func BackendPolicy() *Policy {
	masters := []certs.Role{certs.RoleMaster}
	return &Policy{service: "LanceBackendService", rules: map[string]rule{
		"submit_lance_index_job":        {roles: masters, refuse: refuseStatus},
		"heartbeat":                     {roles: masters, refuse: refuseHeartbeat},
		"inspect_lance_dataset":         {roles: masters, refuse: refuseInspect},
		"query_lance_index_invocations": {roles: masters, refuse: refuseQuery},
		"resolve_lance_index_job":       {roles: masters, refuse: refuseResolve},
		"get_lance_index_job_log":       {roles: masters, refuse: refuseJobLog},
		"probe_object_store":            {roles: masters, refuse: refuseProbe},
	}}
}

// ServerOption configures NewServer.
type ServerOption func(*serverOptions)

type serverOptions struct {
	policy *Policy
}

// WithPolicy authorizes every call against p whenever the server verifies
// client certificates (Config.Certs, or a Config.TLS that requires them).
// NewServer fails when p does not name exactly the processor's methods.
func WithPolicy(p *Policy) ServerOption { return func(o *serverOptions) { o.policy = p } }

// Identity is what a server knows about the caller of a connection.
type Identity struct {
	// Verified: the caller presented a client certificate the server
	// verified against its CA.
	Verified bool
	// Role is the verified certificate's role; "" when none (RoleErr says
	// why).
	Role    certs.Role
	RoleErr error
	// Subject is the verified certificate's common name (for logs).
	Subject string
}

// Caller is the other end of one served connection.
type Caller struct {
	remote net.Addr
	tls    *tls.Conn // nil: plaintext

	once sync.Once
	id   Identity
}

func newCaller(conn net.Conn) *Caller {
	p := &Caller{remote: conn.RemoteAddr()}
	p.tls, _ = conn.(*tls.Conn)
	return p
}

// RemoteAddr is the peer's address.
func (p *Caller) RemoteAddr() string {
	if p.remote == nil {
		return ""
	}
	return p.remote.String()
}

// Identity returns the caller's identity. Call it once a request has been
// read (the TLS handshake is then complete); it is computed once.
func (p *Caller) Identity() Identity {
	p.once.Do(func() {
		if p.tls == nil {
			return
		}
		leaf := verifiedLeaf(p.tls.ConnectionState())
		if leaf == nil {
			return
		}
		p.id.Verified = true
		p.id.Subject = leaf.Subject.CommonName
		p.id.Role, p.id.RoleErr = certs.RoleOf(leaf)
	})
	return p.id
}

type peerKey struct{}

// CallerFromContext returns the caller of the request ctx belongs to, inside
// a handler served by a Server; nil elsewhere.
func CallerFromContext(ctx context.Context) *Caller {
	p, _ := ctx.Value(peerKey{}).(*Caller)
	return p
}

// authzMiddleware refuses every call p does not allow to the caller's role.
// A refused call's arguments are skipped unread and the refusal answered in
// the method's result type, so the connection stays usable. Refusals are
// logged with the method, the role, the certificate's subject and the
// peer's address: never request content.
func authzMiddleware(p *Policy, log *zap.Logger) thrift.ProcessorMiddleware {
	return func(name string, next thrift.TProcessorFunction) thrift.TProcessorFunction {
		r, known := p.rules[name]
		return thrift.WrappedTProcessorFunction{
			Wrapped: func(ctx context.Context, seqID int32, in, out thrift.TProtocol) (bool, thrift.TException) {
				var id Identity
				peer := CallerFromContext(ctx)
				if peer != nil {
					id = peer.Identity()
				}
				if known && id.Role != "" && slices.Contains(r.roles, id.Role) {
					return next.Process(ctx, seqID, in, out)
				}
				msg := refusalMessage(p.service, name, id)
				log.Warn("rpc: call refused by authorization", zap.String("service", p.service), zap.String("method", name),
					zap.Stringer("role", id.Role), zap.String("subject", id.Subject), zap.String("peer", peer.addr()))
				if err := refuse(ctx, name, seqID, in, out, r, known, msg); err != nil {
					return false, thrift.WrapTException(err)
				}
				return true, nil
			},
		}
	}
}

func (p *Caller) addr() string {
	if p == nil {
		return ""
	}
	return p.RemoteAddr()
}

func refusalMessage(service, method string, id Identity) string {
	switch {
	case !id.Verified:
		return fmt.Sprintf("permission denied: %s.%s needs a verified client certificate", service, method)
	case id.Role == "":
		return fmt.Sprintf("permission denied: the client certificate carries no valid lancemaster role, so it may not call %s.%s", service, method)
	}
	return fmt.Sprintf("permission denied: a %s certificate may not call %s.%s", id.Role, service, method)
}

// refuse reads past the call's arguments and writes the refusal.
func refuse(ctx context.Context, name string, seqID int32, in, out thrift.TProtocol, r rule, known bool, msg string) error {
	if err := in.Skip(ctx, thrift.STRUCT); err != nil {
		return err
	}
	if err := in.ReadMessageEnd(ctx); err != nil {
		return err
	}
	if !known || r.refuse == nil {
		return writeException(ctx, out, name, seqID, thrift.NewTApplicationException(thrift.INTERNAL_ERROR, msg))
	}
	id, field, v := r.refuse(msg)
	for _, step := range []func() error{
		func() error { return out.WriteMessageBegin(ctx, name, thrift.REPLY, seqID) },
		func() error { return out.WriteStructBegin(ctx, name+"_result") },
		func() error { return out.WriteFieldBegin(ctx, field, thrift.STRUCT, id) },
		func() error { return v.Write(ctx, out) },
		func() error { return out.WriteFieldEnd(ctx) },
		func() error { return out.WriteFieldStop(ctx) },
		func() error { return out.WriteStructEnd(ctx) },
		func() error { return out.WriteMessageEnd(ctx) },
		func() error { return out.Flush(ctx) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
