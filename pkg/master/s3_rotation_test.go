package master_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// Credential rotation on an object-store catalog: the credentials file is
// read on the sending master at send time, so a file rewritten between
// admission and dispatch is what the dispatch carries. The catalog's probe
// and the admission's inspect carried the first keys; the dispatch, sent
// after the rewrite, carries the second and only the second.
func TestObjectStoreCredentialsRotatedBetweenAdmissionAndDispatch(t *testing.T) {
	secrets := t.TempDir()
	write := func(key, secret string) {
		t.Helper()
		body := `{"aws_access_key_id":"` + key + `","aws_secret_access_key":"` + secret +
			`","aws_endpoint":"http://127.0.0.1:9","allow_http":"true","aws_region":"us-east-1"}`
		if err := os.WriteFile(filepath.Join(secrets, "s3-creds"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("AKIA-FIRST", "secret-first-1a2b")
	c := mastertest.NewWith(t, func(n *config.Node) { n.SecretsDir = secrets }, func(int) master.Options {
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond}, Credentials: config.DirCredentials{Dir: secrets}}
	})
	newWorker(c)
	var mu sync.Mutex
	var probes []*wire.TProbeStoreRequest
	c.Backend.SetProbeStoreHook(func(r *wire.TProbeStoreRequest) *wire.TProbeStoreResponse {
		mu.Lock()
		probes = append(probes, r)
		mu.Unlock()
		return nil // the fake's default: conditional PUT honoured
	})
	l := c.Leader()
	call := func(fn func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Client(l).Call(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.AddBackend(ctx, c.Backend.Addr(), "")
		return err
	})
	eventually(t, 20*time.Second, "the backend to be alive", func() bool {
		alive := false
		call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
			bs, err := a.ListBackends(ctx)
			for _, b := range bs {
				alive = alive || b.GetAlive()
			}
			return err
		})
		return alive
	})
	root, creds := "s3://lake/prefix", "s3-creds"
	call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, ""); err != nil {
			return err
		}
		_, err := a.SetOption(ctx, options.OptDispatcherPaused, "true", "")
		return err
	})
	mu.Lock()
	if len(probes) != 1 || probes[0].RootURI != root || probes[0].StorageOptions["aws_secret_access_key"] != "secret-first-1a2b" {
		t.Fatalf("the catalog's probe: %d probes", len(probes))
	}
	mu.Unlock()
	c.Backend.SetDataset(root+"/db/t.lance", job.Snapshot{Version: 1, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})
	ids := c.AdmitIDs(l, "lake", "t", "i", 1)
	ins := c.Backend.Inspects()
	if got := ins[len(ins)-1].StorageOptions["aws_secret_access_key"]; got != "secret-first-1a2b" {
		t.Fatalf("the admission's inspect carried %q", got)
	}
	if n := len(c.Backend.Dispatches()); n != 0 {
		t.Fatalf("%d dispatches while paused", n)
	}

	write("AKIA-SECOND", "secret-second-3c4d")
	call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.SetOption(ctx, options.OptDispatcherPaused, "false", "")
		return err
	})
	c.WaitSettled(l, ids)
	ds := c.Backend.Dispatches()
	if len(ds) == 0 {
		t.Fatal("no dispatch")
	}
	for _, d := range ds {
		if d.StorageOptions["aws_secret_access_key"] != "secret-second-3c4d" || d.StorageOptions["aws_access_key_id"] != "AKIA-SECOND" {
			t.Fatalf("a dispatch carried the keys of before the rotation (access key %q)", d.StorageOptions["aws_access_key_id"])
		}
	}
	if r, _ := c.Masters[l].FSM().State().Job(ids[0]); r.MutationState != job.Committed {
		t.Fatalf("job %d is %s", ids[0], r.MutationState)
	}
}
