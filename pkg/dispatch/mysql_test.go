package dispatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/dispatch/mariadbtest"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The mysql refresher against a real MariaDB (mariadbtest): its template
// creates table {db}.{table} with a column named after the catalog, so the
// test sees every substituted name in information_schema.

const myTemplate = "CREATE TABLE IF NOT EXISTS {db}.{table} ({catalog} int)"

// mySecrets writes credentials files into a fresh secrets directory:
// name -> content.
func mySecrets(t *testing.T, files map[string]string) config.DirCredentials {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return config.DirCredentials{Dir: dir}
}

func myGoodSecrets(t *testing.T) config.DirCredentials {
	return mySecrets(t, map[string]string{
		"refresh":      "# the refresh user\nuser=" + mariadbtest.User + "\npassword=" + mariadbtest.Password + "\n",
		"refresh.json": `{"user": "` + mariadbtest.User + `", "password": "` + mariadbtest.Password + `"}`,
		"wrong":        "user=" + mariadbtest.User + "\npassword=Wr0ng-Pa55-for-the-test\n",
		"nouser":       "password=" + mariadbtest.Password + "\n",
		"extra":        "user=u\npassword=p\nhost=fe1\n",
	})
}

func myRequest(addr, table string) RefreshRequest {
	return RefreshRequest{JobID: 9, Catalog: "lake", DB: mariadbtest.DB, Table: table, IndexName: "idx",
		MutationType: "CREATE", Outcome: "COMMITTED", Address: addr, Statement: myTemplate, CredentialsRef: "refresh"}
}

// myNoSecret fails when err's text carries the password or a DSN.
func myNoSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	msg := err.Error()
	for _, s := range append(secrets, mariadbtest.Password, "@tcp(") {
		if strings.Contains(msg, s) {
			t.Fatalf("error %q carries %q", msg, s)
		}
	}
}

func TestMySQLRefreshRunsTemplate(t *testing.T) {
	srv := mariadbtest.Shared(t)
	m := NewMySQLRefresher(MySQLOptions{Credentials: myGoodSecrets(t)})
	// A backtick in a name is quoted, not an end of the identifier.
	req := myRequest(srv.Addr, "or`ders")
	req.Catalog = "my`lake"
	for i := 0; i < 2; i++ { // the second refresh of the same job is harmless
		if err := m.Refresh(context.Background(), req); err != nil {
			t.Fatalf("refresh %d: %v", i+1, err)
		}
	}
	if got := srv.Columns(t, "or`ders"); got != "my`lake" {
		t.Fatalf("columns of lm.or`ders = %q, want my`lake", got)
	}
	req.CredentialsRef, req.Table = "refresh.json", "json_creds" // the JSON form of the file
	if err := m.Refresh(context.Background(), req); err != nil {
		t.Fatalf("refresh with JSON credentials: %v", err)
	}
	if got := srv.Columns(t, "json_creds"); got != "my`lake" {
		t.Fatalf("columns of lm.json_creds = %q", got)
	}
}

func TestMySQLRefreshBadCredentials(t *testing.T) {
	srv := mariadbtest.Shared(t)
	m := NewMySQLRefresher(MySQLOptions{Credentials: myGoodSecrets(t)})
	req := myRequest(srv.Addr, "never")
	req.CredentialsRef = "wrong"
	err := m.Refresh(context.Background(), req)
	var me *MySQLRefreshError
	if !errors.As(err, &me) || me.Stage != "connect" || me.Number != 1045 || !strings.Contains(err.Error(), "Access denied") ||
		!strings.Contains(err.Error(), srv.Addr) || !strings.Contains(err.Error(), `catalog "lake"`) {
		t.Fatalf("bad password: %v", err)
	}
	myNoSecret(t, err, "Wr0ng-Pa55-for-the-test")
	if got := srv.Columns(t, "never"); got != "" {
		t.Fatalf("a refused login created a table: %q", got)
	}
}

func TestMySQLRefreshServerError(t *testing.T) {
	srv := mariadbtest.Shared(t)
	m := NewMySQLRefresher(MySQLOptions{Credentials: myGoodSecrets(t)})
	req := myRequest(srv.Addr, "t")
	req.Statement = "" // Doris's REFRESH TABLE: MariaDB does not know it
	err := m.Refresh(context.Background(), req)
	var me *MySQLRefreshError
	if !errors.As(err, &me) || me.Stage != "execute" || me.Number != 1064 {
		t.Fatalf("REFRESH TABLE on MariaDB: %v", err)
	}
	myNoSecret(t, err)
}

// The server is down: the refresh driver records R3; once it is back and
// the retry wait has passed, the retry succeeds (R2) and its effect shows.
func TestMySQLRefreshServerDownThenUp(t *testing.T) {
	srv := mariadbtest.Shared(t)
	f := rfNew(t)
	cat := f.apply(raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: f.nowMs(), Catalog: &journal.TCatalogRecord{
		Name: "doris", RootURI: thrift.StringPtr(rfRoot), RefreshKind: thrift.StringPtr(raftfsm.RefreshMySQL),
		RefreshAddress: thrift.StringPtr(srv.Addr), RefreshStatement: thrift.StringPtr(myTemplate),
		RefreshCredentialsRef: thrift.StringPtr("refresh")}}).GetID()
	id := f.admit(cat, mariadbtest.DB, "after_outage", "idx", job.Create, false)
	f.finish(job.NativeOK, false, id)
	m := NewMySQLRefresher(MySQLOptions{Credentials: myGoodSecrets(t)})
	d := NewRefreshDriver(RefreshDeps{Proposer: f.p, Reader: f.fsm, Clock: f.clk.Now, Logger: f.logger,
		Refreshers: DefaultRefreshers(nil, m)})

	srv.Stop(t)
	t.Cleanup(func() {
		if t.Failed() {
			srv.Start(t) // leave the shared server running for the tests after this one
		}
	})
	rfStep(t, d)
	r := f.job(id)
	if r.RefreshState != job.RefreshFailed || !r.Unresolved() {
		t.Fatalf("with the server down: refresh %s, unresolved %t; want FAILED (R3)", r.RefreshState, r.Unresolved())
	}
	logged := f.logs.FilterMessageSnippet("refresh failed").All()
	if len(logged) != 1 || !strings.Contains(logged[0].ContextMap()["error"].(string), srv.Addr) {
		t.Fatalf("failure logs %+v, want one naming the address", logged)
	}
	for _, e := range f.logs.All() {
		for k, v := range e.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, mariadbtest.Password) {
				t.Fatalf("log %q field %s carries the password", e.Message, k)
			}
		}
	}

	srv.Start(t)
	rfStep(t, d) // the retry wait has not passed: nothing is tried
	if f.job(id).RefreshState != job.RefreshFailed {
		t.Fatalf("retried before lance_index_job_refresh_retry_second")
	}
	f.clk.Advance(time.Duration(f.st().Options().RefreshRetrySecond) * time.Second)
	rfStep(t, d)
	if r := f.job(id); r.RefreshState != job.RefreshDone || r.Unresolved() {
		t.Fatalf("after the server returned: refresh %s, unresolved %t; want DONE (R2)", r.RefreshState, r.Unresolved())
	}
	if got := srv.Columns(t, "after_outage"); got != "doris" {
		t.Fatalf("columns of lm.after_outage = %q, want doris", got)
	}
}
