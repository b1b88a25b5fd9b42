package admin

import (
	"context"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Catalog input the FSM would refuse is refused before it is journaled,
// whichever field combination makes it so (CI's fuzzer found a refresh URL
// without the webhook kind journaled and then refused by the FSM).
func TestCatalogInvalidInputJournalsNothing(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	cases := []struct {
		name string
		fn   func() error
	}{
		{"create: refresh URL without the webhook kind", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c1", RootURI: strp("/data/c1"),
				RefreshURL: strp("http://127.0.0.1:9/refresh")}, "")
			return err
		}},
		{"create: refresh URL with kind none", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c2", RootURI: strp("/data/c2"),
				RefreshKind: strp("none"), RefreshURL: strp("http://127.0.0.1:9/refresh")}, "")
			return err
		}},
		{"create: webhook without a URL", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c3", RootURI: strp("/data/c3"),
				RefreshKind: strp("webhook")}, "")
			return err
		}},
		{"update: a URL on a catalog whose kind is none", func() error {
			_, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
				RefreshURL: strp("http://127.0.0.1:9/refresh")})
			return err
		}},
		{"update: webhook on a catalog without a URL", func() error {
			_, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
				RefreshKind: strp("webhook")})
			return err
		}},
		{"create: mysql without an address", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c4", RootURI: strp("/data/c4"),
				RefreshKind: strp("mysql"), RefreshCredentialsRef: strp("doris")}, "")
			return err
		}},
		{"create: mysql without credentials", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c5", RootURI: strp("/data/c5"),
				RefreshKind: strp("mysql"), RefreshAddress: strp("127.0.0.1:9030")}, "")
			return err
		}},
		{"create: an address without the mysql kind", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c6", RootURI: strp("/data/c6"),
				RefreshAddress: strp("127.0.0.1:9030")}, "")
			return err
		}},
		{"create: a statement with an unknown placeholder", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c7", RootURI: strp("/data/c7"),
				RefreshKind: strp("mysql"), RefreshAddress: strp("127.0.0.1:9030"), RefreshCredentialsRef: strp("doris"),
				RefreshStatement: strp("REFRESH TABLE {schema}.{table}")}, "")
			return err
		}},
		{"update: an address that is not HOST:PORT", func() error {
			_, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
				RefreshKind: strp("mysql"), RefreshAddress: strp("fe1"), RefreshCredentialsRef: strp("doris")})
			return err
		}},
		{"update: a placeholder inside quotes", func() error {
			_, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
				RefreshKind: strp("mysql"), RefreshAddress: strp("127.0.0.1:9030"), RefreshCredentialsRef: strp("doris"),
				RefreshStatement: strp("SELECT '{table}'")})
			return err
		}},
		{"update: negative optimize rows", func() error {
			_, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", OptimizeUnindexedRows: i64p(-1)})
			return err
		}},
		{"create: negative optimize interval", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c8", RootURI: strp("/data/c8"),
				OptimizeMinIntervalSecond: i64p(-1)}, "")
			return err
		}},
	}
	for _, c := range cases {
		before := h.prop.Index()
		err := c.fn()
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if code := errCode(t, err); code != adminapi.TErrorCode_INVALID {
			t.Errorf("%s: code %s, want INVALID (%v)", c.name, code, err)
		}
		if n := h.prop.Index() - before; n != 0 {
			t.Errorf("%s: refused as INVALID but journaled %d entries", c.name, n)
		}
	}
}

// Switching refresh kinds on an existing catalog: webhook with a stored URL
// needs no URL again; none drops the stored URL.
func TestCatalogRefreshKindUpdates(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	hook := "http://127.0.0.1:9/refresh"
	c, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
		RefreshKind: strp("webhook"), RefreshURL: strp(hook)})
	if err != nil || c.GetRefreshKind() != RefreshWebhook || c.GetRefreshURL() != hook {
		t.Fatalf("set webhook: %v %v", c, err)
	}
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", RefreshKind: strp("none")}); err != nil ||
		c.GetRefreshKind() != RefreshNone || c.GetRefreshURL() != "" {
		t.Fatalf("back to none: %v %v", c, err)
	}
	if _, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", RefreshURL: strp(hook)}); err == nil {
		t.Fatal("a URL alone on a none catalog was accepted")
	}
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
		RefreshKind: strp("webhook"), RefreshURL: strp(hook)}); err != nil {
		t.Fatalf("webhook again: %v", err)
	}
	// The URL is stored: changing only the credentials keeps the webhook.
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", CredentialsRef: strp("lake-creds")}); err != nil ||
		c.GetRefreshURL() != hook {
		t.Fatalf("credentials update: %v %v", c, err)
	}
}

func i64p(v int64) *int64 { return &v }

// Refresh kind mysql and the OPTIMIZE policy: stored, shown, and cleared
// with a switch to another kind.
func TestCatalogMySQLRefreshAndOptimizeFields(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	c, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "doris", RootURI: strp("/data/doris"),
		RefreshKind: strp("MYSQL"), RefreshAddress: strp("127.0.0.1:9030"), RefreshCredentialsRef: strp("doris-refresh"),
		OptimizeUnindexedRows: i64p(5000)}, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if c.GetRefreshKind() != RefreshMySQL || c.GetRefreshAddress() != "127.0.0.1:9030" ||
		c.GetRefreshCredentialsRef() != "doris-refresh" || c.GetRefreshStatement() != "" ||
		c.GetOptimizeUnindexedRows() != 5000 || c.GetOptimizeMinIntervalSecond() != raftfsm.DefaultOptimizeMinIntervalSecond {
		t.Fatalf("created %+v", c)
	}
	stmt := "CREATE TABLE IF NOT EXISTS lm.{table} (x int)"
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "doris", RefreshStatement: &stmt,
		OptimizeMinIntervalSecond: i64p(60)}); err != nil || c.GetRefreshStatement() != stmt ||
		c.GetOptimizeMinIntervalSecond() != 60 || c.GetOptimizeUnindexedRows() != 5000 {
		t.Fatalf("update: %+v %v", c, err)
	}
	list, err := h.srv.ListCatalogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed *adminapi.TCatalog
	for _, l := range list {
		if l.Name == "doris" {
			listed = l
		}
	}
	if listed == nil || listed.GetRefreshAddress() != "127.0.0.1:9030" || listed.GetRefreshStatement() != stmt {
		t.Fatalf("listed %+v", listed)
	}
	// Switching to webhook drops the mysql fields the request does not set.
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "doris", RefreshKind: strp("webhook"),
		RefreshURL: strp("http://127.0.0.1:9/r")}); err != nil || c.GetRefreshAddress() != "" || c.GetRefreshStatement() != "" ||
		c.GetRefreshCredentialsRef() != "" {
		t.Fatalf("to webhook: %+v %v", c, err)
	}
	// And back to mysql drops the URL.
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "doris", RefreshKind: strp("mysql"),
		RefreshAddress: strp("[::1]:9030"), RefreshCredentialsRef: strp("doris-refresh")}); err != nil ||
		c.GetRefreshURL() != "" || c.GetRefreshAddress() != "[::1]:9030" {
		t.Fatalf("to mysql: %+v %v", c, err)
	}
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "doris", RefreshKind: strp("none")}); err != nil ||
		c.GetRefreshAddress() != "" || c.GetRefreshCredentialsRef() != "" || c.GetRefreshKind() != RefreshNone {
		t.Fatalf("to none: %+v %v", c, err)
	}
}
