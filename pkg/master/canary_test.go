package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

const storageCanary = "STORAGE-CANARY-9d41e7b2c0"

// Storage credentials, read from the secrets directory at send time, reach
// the backend inside the requests and appear nowhere else: not in a raft log
// or snapshot file, not in a log line (debug level included), not in what the
// admin API (and so the CLI, -o json included) shows.
func TestStorageCredentialsOnlyOnTheWire(t *testing.T) {
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "lake-creds"),
		[]byte(`{"aws_access_key_id":"AKIA-canary","aws_secret_access_key":"`+storageCanary+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	c := mastertest.NewWith(t, func(n *config.Node) {
		n.SecretsDir = secrets
		n.SnapshotThreshold, n.TrailingLogs = 32, 8
	}, func(i int) master.Options {
		return master.Options{Logger: zap.New(core), Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond},
			Credentials: config.DirCredentials{Dir: secrets}}
	})
	w := newWorker(c)
	// A backend that failed to redact: its log tails and its job log carry
	// the credential; the masters journal and show neither.
	w.logTail = "opening s3 with aws_secret_access_key=" + storageCanary + "\n"
	c.Backend.SetJobLogHook(func(r *wire.TJobLogRequest) *wire.TJobLogResponse {
		st := wire.TLanceInvocationState_FINISHED
		return &wire.TJobLogResponse{Status: &wire.TStatus{StatusCode: wire.TStatusCode_OK}, State: &st,
			Log: thrift.StringPtr("line with " + storageCanary + "\n")}
	})
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root, creds := "/data/lake", "lake-creds"
	err := c.Client(l).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, ""); err != nil {
			return err
		}
		if _, err := a.AddBackend(ctx, c.Backend.Addr(), ""); err != nil {
			return err
		}
		_, err := a.SetOption(ctx, options.OptEnableLocalFileMutation, "true", "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Backend.SetDataset("/data/lake/db/t.lance", job.Snapshot{Version: 1, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})
	ids := c.AdmitIDs(l, "lake", "t", "i", 5)
	c.WaitSettled(l, ids)

	// It reached the wire: inspect and submit both carried it.
	seen := 0
	for _, o := range c.Backend.StorageOptionsSeen() {
		if o["aws_secret_access_key"] == storageCanary {
			seen++
		}
	}
	if seen < len(ids)+len(ids) {
		t.Fatalf("the credential reached the backend %d times; want inspect and submit for each of %d jobs", seen, len(ids))
	}

	// Not in what operators see.
	err = c.Client(l).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		list, err := a.ListJobs(ctx, &adminapi.TListJobsRequest{})
		if err != nil {
			return err
		}
		cats, err := a.ListCatalogs(ctx)
		if err != nil {
			return err
		}
		show, err := a.ShowJob(ctx, ids[0], true)
		if err != nil {
			return err
		}
		fromBackend, err := a.JobLogs(ctx, ids[0], 0)
		if err != nil {
			return err
		}
		if fromBackend.Source != "backend" || !strings.Contains(fromBackend.Log, "line with [redacted]") {
			t.Errorf("jobs logs should answer the backend's log, redacted (the scan would prove nothing): %+v", fromBackend)
		}
		c.Backend.SetJobLogHook(nil) // an older backend: the journal's tail
		fromJournal, err := a.JobLogs(ctx, ids[0], 0)
		if err != nil {
			return err
		}
		if fromJournal.Source != "journal" || !strings.Contains(fromJournal.Log, "opening s3 with [redacted]=[redacted]") {
			t.Errorf("jobs logs should answer the journal's tail, redacted (the scan would prove nothing): %+v", fromJournal)
		}
		for _, v := range []any{list, cats, show, fromBackend, fromJournal} {
			b, _ := json.Marshal(v)
			if bytes.Contains(b, []byte(storageCanary)) {
				t.Errorf("admin output carries the credential: %s", b)
			}
			if bytes.Contains(b, []byte("/data/lake/db")) {
				t.Errorf("admin output carries a locator: %s", b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Not in any file a master wrote (raft log, stable store, snapshots).
	for i, m := range c.Masters {
		if err := m.Node().Snapshot(); err != nil && !strings.Contains(err.Error(), "nothing new") {
			t.Fatalf("m%d snapshot: %v", i+1, err)
		}
	}
	files := 0
	for _, n := range c.Nodes {
		_ = filepath.Walk(n.DataDir, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("read %s: %v", p, err)
				return nil
			}
			files++
			if bytes.Contains(b, []byte(storageCanary)) {
				t.Errorf("%s holds the storage credential", p)
			}
			return nil
		})
	}
	if files < 6 {
		t.Fatalf("only %d files searched", files)
	}

	// Not in any log line.
	testkit.NoSecretInLogs(t, logs, storageCanary)
	if logs.Len() == 0 {
		t.Fatal("no log lines were captured")
	}
}
