package master_test

import (
	"context"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/dispatch/mariadbtest"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// A catalog of refresh kind mysql, through the whole master: the leader's
// refresh driver logs in to a real MariaDB with the user and password of the
// credentials file in its secrets_dir and runs the catalog's statement; the
// jobs resolve only once it ran (the effect is the table it creates).
func TestMySQLRefreshThroughTheMaster(t *testing.T) {
	srv := mariadbtest.New(t)
	secrets := t.TempDir()
	mariadbtest.CredentialsFile(t, secrets, "doris-refresh")
	c := mastertest.NewWith(t, func(n *config.Node) { n.SecretsDir = secrets }, func(int) master.Options {
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond}, Credentials: config.DirCredentials{Dir: secrets}}
	})
	newWorker(c)
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root, kind, stmt, creds := "/data/lake", "mysql", "CREATE TABLE IF NOT EXISTS "+mariadbtest.DB+".{table} ({catalog} int)", "doris-refresh"
	addr := srv.Addr
	err := c.Client(l).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "doris", RootURI: &root, RefreshKind: &kind,
			RefreshAddress: &addr, RefreshStatement: &stmt, RefreshCredentialsRef: &creds}, ""); err != nil {
			return err
		}
		_, err := a.AddBackend(ctx, c.Backend.Addr(), "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetOptions(l, map[string]string{options.OptEnableLocalFileMutation: "true"})
	c.Backend.SetDataset("/data/lake/db/items.lance", job.Snapshot{Version: 3, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})
	ids := c.AdmitIDs(l, "doris", "items", "r", 2)
	c.WaitSettled(l, ids)
	for _, id := range ids {
		if r, _ := c.Masters[l].FSM().State().Job(id); r.RefreshState != job.RefreshDone {
			t.Fatalf("job %d: refresh %s, want DONE", id, r.RefreshState)
		}
	}
	if got := srv.Columns(t, "items"); got != "doris" {
		t.Fatalf("columns of %s.items = %q, want doris (the refresh statement did not run)", mariadbtest.DB, got)
	}
}
