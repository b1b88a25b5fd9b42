package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// The mysql refresh kind and the OPTIMIZE policy flags of catalogs
// create|update, and how list and show print them.

func TestCatalogsMySQLRefreshFlags(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{catalog: &adminapi.TCatalog{CatalogID: thrift.Int64Ptr(4), Name: "doris"}}
	addr := serve(t, f)

	mustOK(t)(cli(t, addr, "catalogs", "create", "doris", "--root", "/data/lance", "--refresh-kind", "MySQL",
		"--refresh-address", "fe1:9030", "--refresh-credentials", "doris-refresh",
		"--refresh-statement", "REFRESH TABLE {db}.{table}", "--optimize-unindexed-rows", "100000"))
	got := f.onlyCall(t, "CreateCatalog").(*adminapi.TCatalog)
	want := &adminapi.TCatalog{Name: "doris", RootURI: thrift.StringPtr("/data/lance"), RefreshKind: thrift.StringPtr("mysql"),
		RefreshAddress: thrift.StringPtr("fe1:9030"), RefreshCredentialsRef: thrift.StringPtr("doris-refresh"),
		RefreshStatement: thrift.StringPtr("REFRESH TABLE {db}.{table}"), OptimizeUnindexedRows: thrift.Int64Ptr(100000)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("create request = %s\nwant             %s", got, want)
	}

	g := &fakeMaster{catalog: &adminapi.TCatalog{CatalogID: thrift.Int64Ptr(4), Name: "doris"}}
	addr = serve(t, g)
	mustOK(t)(cli(t, addr, "catalogs", "update", "doris", "--optimize-min-interval-second", "600", "--refresh-statement", ""))
	upd := g.onlyCall(t, "UpdateCatalog").(*adminapi.TUpdateCatalogRequest)
	wantUpd := &adminapi.TUpdateCatalogRequest{Name: "doris", RefreshStatement: thrift.StringPtr(""),
		OptimizeMinIntervalSecond: thrift.Int64Ptr(600), Actor: thrift.StringPtr("alice")}
	if !reflect.DeepEqual(upd, wantUpd) {
		t.Errorf("update request = %s\nwant             %s", upd, wantUpd)
	}

	for name, args := range map[string][]string{
		"kinds disagree":    {"catalogs", "update", "doris", "--refresh-kind", "mysql", "--refresh", "none"},
		"negative rows":     {"catalogs", "update", "doris", "--optimize-unindexed-rows", "-1"},
		"negative interval": {"catalogs", "create", "x", "--root", "/d", "--optimize-min-interval-second", "-5"},
		"nothing to update": {"catalogs", "update", "doris"},
	} {
		out, errOut, code := cli(t, addr, args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d (stdout %q, stderr %q)", name, code, exitUsage, out, errOut)
		}
	}
	if n := len(g.recordedCalls()); n != 1 {
		t.Errorf("usage errors sent %d more calls", n-1)
	}
}

func TestCatalogsListAndShowMySQL(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{catalogs: []*adminapi.TCatalog{{
		CatalogID: thrift.Int64Ptr(2), Name: "Doris", Provider: thrift.StringPtr("DIRECTORY"),
		RootURI: thrift.StringPtr("/data/lance"), RefreshKind: thrift.StringPtr("mysql"),
		RefreshAddress: thrift.StringPtr("fe1:9030"), RefreshCredentialsRef: thrift.StringPtr("doris-refresh"),
		RefreshStatement: thrift.StringPtr(""), OptimizeUnindexedRows: thrift.Int64Ptr(5000),
		OptimizeMinIntervalSecond: thrift.Int64Ptr(3600), UnresolvedJobs: thrift.Int32Ptr(0),
		CreateTimeMs: thrift.Int64Ptr(1700000000000 - 4*86400_000), UpdateTimeMs: thrift.Int64Ptr(1700000000000),
	}}}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "catalogs", "list"))
	if !strings.Contains(out, "fe1:9030 (credentials doris-refresh)") || !strings.Contains(out, "> 5000 unindexed rows, every 3600s at most") {
		t.Errorf("list =\n%s", out)
	}
	out = mustOK(t)(cli(t, addr, "catalogs", "show", "doris"))
	for _, want := range []string{
		"refresh kind:        mysql\n",
		"refresh address:     fe1:9030\n",
		"refresh statement:   REFRESH TABLE {catalog}.{db}.{table} (default)\n",
		"refresh credentials: doris-refresh\n",
		"optimize policy:     > 5000 unindexed rows, every 3600s at most\n",
		"created:             4d3h ago\n",
		"updated:             3h25m ago\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out = mustOK(t)(cli(t, addr, "-o", "json", "catalogs", "show", "DORIS"))
	if !strings.Contains(out, `"refresh_address": "fe1:9030"`) || !strings.Contains(out, `"optimize_unindexed_rows": 5000`) {
		t.Errorf("json = %s", out)
	}
	if _, errOut, code := cli(t, addr, "catalogs", "show", "nope"); code != exitError || !strings.Contains(errOut, "NOT_FOUND") {
		t.Errorf("show of a missing catalog: exit %d, stderr %q", code, errOut)
	}
}
