package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/rpc"
	"github.com/lancemaster/lancemaster/pkg/testkit"
)

// fakeWorker speaks the worker frame protocol (pkg/backend/frame): it reads
// the request frame, copies the request to request.json next to it (so the
// test can see the credentials reached the worker and nowhere else), and
// answers NATIVE_OK.
const fakeWorker = `#!/bin/sh
cat > "$(dirname "$0")/request.bin"
body='{"protocol":1,"mode":"build","result_code":"NATIVE_OK","message":"built by the fake worker","new_dataset_version":8}'
len=${#body}
printf "\\000\\000\\000\\$(printf '%03o' "$len")"
printf '%s' "$body"
`

const (
	binCanaryKey   = "canary_storage_key_51c9"
	binCanaryValue = "CANARY-STORAGE-VALUE-0a7d3f"
	binSecret      = "bin-invocation-secret-77e1"
)

// reportSink is a master that only takes result reports.
type reportSink struct {
	adminapi.LanceMasterService // nil: nothing else is called
	mu                          sync.Mutex
	results                     []*wire.TLanceIndexJobReport
}

func (s *reportSink) ReportLanceIndexJobResult_(_ context.Context, r *wire.TLanceIndexJobReport) (*wire.TStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, r)
	return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
}

func (s *reportSink) ReportLanceIndexJobTermination(context.Context, *wire.TLanceIndexJobTerminationReport) (*wire.TStatus, error) {
	return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil
}

func (s *reportSink) got() []*wire.TLanceIndexJobReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*wire.TLanceIndexJobReport(nil), s.results...)
}

// syncBuffer is a bytes.Buffer safe to read while exec copies into it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// backendProc is one `lancemaster backend` process.
type backendProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
}

func startBackend(t *testing.T, bin, cfg string) *backendProc {
	t.Helper()
	p := &backendProc{stderr: &syncBuffer{}}
	p.cmd = exec.Command(bin, "backend", "--config", cfg)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

// waitFor polls cond until it holds; the test fails after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, what, cond)
}

// The outbox test with the real binary: a build finishes while no
// master is reachable, the backend is killed with SIGKILL, and the restarted
// backend delivers the stored NATIVE_OK with the old process identity.
func TestBackendKill9DeliversFromTheOutbox(t *testing.T) {
	bin := builtBinary(t)
	dir := t.TempDir()
	workerDir := filepath.Join(dir, "worker")
	if err := os.MkdirAll(workerDir, 0o755); err != nil {
		t.Fatal(err)
	}
	worker := filepath.Join(workerDir, "worker.sh")
	if err := os.WriteFile(worker, []byte(fakeWorker), 0o755); err != nil {
		t.Fatal(err)
	}
	listen := deadAddress(t)
	dataDir := filepath.Join(dir, "data")
	writeCfg := func(name, master string) string {
		p := filepath.Join(dir, name)
		cfg := fmt.Sprintf("listen: %s\ndata_dir: %s\nmasters: [%s]\nisolation: best-effort\nworker: [/bin/sh, %s]\n"+
			"log_format: json\nlog_level: debug\n", listen, dataDir, master, worker)
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Run 1: masters unreachable.
	p1 := startBackend(t, bin, writeCfg("unreachable.yaml", deadAddress(t)))
	var p2 *backendProc
	defer func() {
		if t.Failed() {
			t.Logf("first backend's log:\n%s", p1.stderr)
			if p2 != nil {
				t.Logf("second backend's log:\n%s", p2.stderr)
			}
		}
	}()
	client := rpc.NewThriftBackendClient(rpc.DefaultConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	term := int64(3)
	var epoch int64
	waitFor(t, "the backend to answer heartbeats", func() bool {
		hb, err := client.Heartbeat(ctx, listen, &wire.THeartbeatRequest{MasterID: "m1", LeaderTerm: &term})
		if err != nil {
			return false
		}
		epoch = hb.BeProcessEpoch
		return true
	})
	secret, props := binSecret, `{}`
	d := &wire.TLanceIndexJobDispatch{
		JobID: 41, DispatchRevision: 5, InvocationID: "inv-kill9", BeProcessEpoch: epoch,
		DeadlineMs: time.Now().Add(time.Hour).UnixMilli(), MutationType: wire.TLanceIndexMutationType_CREATE,
		IndexName: "id_idx", ColumnName: "id", IndexType: "BTREE", PropertiesJSON: &props, DatasetURI: "/data/db/t.lance",
		AdmittedDatasetVersion: 7, SchemaContractJSON: `{"v":1}`, InvocationSecret: &secret, LeaderTerm: &term,
		StorageOptions: map[string]string{binCanaryKey: "x1", "aws_secret_access_key": binCanaryValue},
	}
	st, err := client.Submit(ctx, listen, d)
	if err != nil || st.StatusCode != wire.TStatusCode_OK {
		t.Fatalf("submit: %v %+v\n%s", err, st, p1.stderr)
	}
	waitFor(t, "the build to finish", func() bool {
		q, err := client.Query(ctx, listen, &wire.TQueryInvocationsRequest{LeaderTerm: term, BeProcessEpoch: epoch, InvocationIds: []string{"inv-kill9"}})
		return err == nil && q.Status.StatusCode == wire.TStatusCode_OK && q.Invocations[0].State == wire.TLanceInvocationState_FINISHED
	})
	// FINISHED is set after the outbox write: the result is on disk now.
	if err := p1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p1.cmd.Wait()
	req, err := os.ReadFile(filepath.Join(workerDir, "request.bin"))
	if err != nil || !bytes.Contains(req, []byte(binCanaryValue)) {
		t.Fatalf("the worker did not get the storage options on stdin (%v)", err)
	}
	outbox, err := os.ReadFile(filepath.Join(dataDir, "outbox.db"))
	if err != nil || !bytes.Contains(outbox, []byte("inv-kill9")) {
		t.Fatalf("the outbox does not hold the report (%v)", err)
	}

	// Run 2: a reachable master.
	sink := &reportSink{}
	srv, err := rpc.NewServer("127.0.0.1:0", adminapi.NewLanceMasterServiceProcessor(sink), rpc.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p2 = startBackend(t, bin, writeCfg("reachable.yaml", srv.Addr().String()))
	waitFor(t, "the stored report to be delivered", func() bool { return len(sink.got()) > 0 })
	r := sink.got()[0]
	if r.GetResultCode() != wire.TLanceIndexJobResultCode_NATIVE_OK || r.BeProcessEpoch != epoch || r.JobID != 41 ||
		r.DispatchRevision != 5 || r.InvocationID != "inv-kill9" || r.GetInvocationSecret() != binSecret {
		t.Fatalf("delivered %+v", r)
	}
	// A graceful stop (SIGTERM) after the delivery.
	waitFor(t, "the outbox acknowledgement", func() bool { return strings.Contains(p2.stderr.String(), "report delivered") })
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p2.cmd.Wait(); err != nil {
		t.Fatalf("backend exit after SIGTERM: %v\n%s", err, p2.stderr)
	}

	outbox, _ = os.ReadFile(filepath.Join(dataDir, "outbox.db"))
	logs := p1.stderr.String() + p2.stderr.String()
	for _, s := range []string{binCanaryKey, binCanaryValue} {
		if strings.Contains(logs, s) {
			t.Errorf("a log line holds the canary %q", s)
		}
		if bytes.Contains(outbox, []byte(s)) {
			t.Errorf("the outbox file holds the canary %q", s)
		}
	}
	if strings.Contains(logs, binSecret) {
		t.Error("a log line holds the invocation secret")
	}
}
