package raftfsm

import (
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
)

// The mysql refresh kind's catalog fields, the statement template and the
// OPTIMIZE policy fields.

func mysqlCatalog(c *journal.TCatalogRecord) {
	c.RefreshKind = thrift.StringPtr(RefreshMySQL)
	c.RefreshAddress = thrift.StringPtr("fe1.example:9030")
	c.RefreshCredentialsRef = thrift.StringPtr("doris-refresh")
}

func TestCreateCatalogMySQLRefresh(t *testing.T) {
	h := newHarness(t)
	wantCode(t, h.apply(CmdCreateCatalog, catalogCmd("doris", func(c *journal.TCatalogRecord) {
		mysqlCatalog(c)
		c.RefreshKind = thrift.StringPtr("MySQL")
		c.RefreshStatement = thrift.StringPtr("REFRESH TABLE {catalog}.{db}.{table}")
		c.OptimizeUnindexedRows = thrift.Int64Ptr(10_000)
	})), journal.TApplyCode_OK)
	c, _ := h.st().Catalog("doris")
	if c.RefreshKind != RefreshMySQL || c.RefreshAddress != "fe1.example:9030" || c.RefreshCredentialsRef != "doris-refresh" ||
		c.RefreshStatement != DefaultRefreshStatement || c.RefreshURL != "" {
		t.Fatalf("catalog = %+v", c)
	}
	if c.OptimizeUnindexedRows != 10_000 || c.OptimizeMinIntervalSecond != DefaultOptimizeMinIntervalSecond {
		t.Fatalf("optimize policy = %d rows / %d s, want 10000 / the default", c.OptimizeUnindexedRows, c.OptimizeMinIntervalSecond)
	}
	wantCode(t, h.apply(CmdCreateCatalog, catalogCmd("ipv6", func(c *journal.TCatalogRecord) {
		mysqlCatalog(c)
		c.RefreshAddress = thrift.StringPtr("[::1]:9030")
	})), journal.TApplyCode_OK)

	before := h.st()
	for name, edit := range map[string]func(c *journal.TCatalogRecord){
		"no address":     func(c *journal.TCatalogRecord) { mysqlCatalog(c); c.RefreshAddress = nil },
		"no credentials": func(c *journal.TCatalogRecord) { mysqlCatalog(c); c.RefreshCredentialsRef = nil },
		"no port":        func(c *journal.TCatalogRecord) { mysqlCatalog(c); c.RefreshAddress = thrift.StringPtr("fe1") },
		"port 0":         func(c *journal.TCatalogRecord) { mysqlCatalog(c); c.RefreshAddress = thrift.StringPtr("fe1:0") },
		"port 70000":     func(c *journal.TCatalogRecord) { mysqlCatalog(c); c.RefreshAddress = thrift.StringPtr("fe1:70000") },
		"userinfo": func(c *journal.TCatalogRecord) {
			mysqlCatalog(c)
			c.RefreshAddress = thrift.StringPtr("root:pw@fe1:9030")
		},
		"long address": func(c *journal.TCatalogRecord) {
			mysqlCatalog(c)
			c.RefreshAddress = thrift.StringPtr(strings.Repeat("a", 300) + ":1")
		},
		"credentials path": func(c *journal.TCatalogRecord) {
			mysqlCatalog(c)
			c.RefreshCredentialsRef = thrift.StringPtr("../etc/x")
		},
		"long credentials": func(c *journal.TCatalogRecord) {
			mysqlCatalog(c)
			c.RefreshCredentialsRef = thrift.StringPtr(strings.Repeat("k", 256))
		},
		"bad statement": func(c *journal.TCatalogRecord) {
			mysqlCatalog(c)
			c.RefreshStatement = thrift.StringPtr("REFRESH TABLE {tbl}")
		},
		"URL with mysql":    func(c *journal.TCatalogRecord) { mysqlCatalog(c); c.RefreshURL = thrift.StringPtr("http://x") },
		"address with none": func(c *journal.TCatalogRecord) { c.RefreshAddress = thrift.StringPtr("fe1:9030") },
		"statement, webhook": func(c *journal.TCatalogRecord) {
			c.RefreshKind, c.RefreshURL, c.RefreshStatement = thrift.StringPtr(RefreshWebhook), thrift.StringPtr("http://x"), thrift.StringPtr("SELECT 1")
		},
		"creds with none":   func(c *journal.TCatalogRecord) { c.RefreshCredentialsRef = thrift.StringPtr("k") },
		"negative rows":     func(c *journal.TCatalogRecord) { c.OptimizeUnindexedRows = thrift.Int64Ptr(-1) },
		"negative interval": func(c *journal.TCatalogRecord) { c.OptimizeMinIntervalSecond = thrift.Int64Ptr(-1) },
		"huge interval": func(c *journal.TCatalogRecord) {
			c.OptimizeMinIntervalSecond = thrift.Int64Ptr(MaxOptimizeMinIntervalSecond + 1)
		},
	} {
		resp := h.apply(CmdCreateCatalog, catalogCmd("other", edit))
		if resp.Code != journal.TApplyCode_INVALID {
			t.Fatalf("%s: code %v (%s)", name, resp.Code, resp.GetMessage())
		}
		if strings.Contains(resp.GetMessage(), "pw@") {
			t.Fatalf("%s: message echoes the address: %s", name, resp.GetMessage())
		}
	}
	h.unchanged(before)
}

func TestUpdateCatalogMySQLAndOptimize(t *testing.T) {
	h := newHarness(t)
	h.createCatalog("lake", testRoot)
	upd := func(edit func(c *journal.TCatalogRecord)) *journal.TApplyResponse {
		c := &journal.TCatalogRecord{Name: "lake"}
		edit(c)
		return h.apply(CmdUpdateCatalog, &journal.TCatalogCommand{NowMs: 50, Catalog: c})
	}
	wantCode(t, upd(mysqlCatalog), journal.TApplyCode_OK)
	wantCode(t, upd(func(c *journal.TCatalogRecord) {
		c.RefreshStatement = thrift.StringPtr("CREATE TABLE IF NOT EXISTS lm.{table} (x int)")
		c.OptimizeUnindexedRows = thrift.Int64Ptr(1)
		c.OptimizeMinIntervalSecond = thrift.Int64Ptr(120)
	}), journal.TApplyCode_OK)
	c, _ := h.st().Catalog("lake")
	if c.RefreshAddress != "fe1.example:9030" || c.RefreshStatement != "CREATE TABLE IF NOT EXISTS lm.{table} (x int)" ||
		c.OptimizeUnindexedRows != 1 || c.OptimizeMinIntervalSecond != 120 || c.UpdateTimeMs != 50 {
		t.Fatalf("catalog = %+v", c)
	}
	before := h.st()
	// Switching the kind away while the mysql fields stay is refused: the
	// admin API clears them with the switch.
	wantCode(t, upd(func(c *journal.TCatalogRecord) { c.RefreshKind = thrift.StringPtr(RefreshNone) }), journal.TApplyCode_INVALID)
	wantCode(t, upd(func(c *journal.TCatalogRecord) { c.RefreshAddress = thrift.StringPtr("") }), journal.TApplyCode_INVALID)
	wantCode(t, upd(func(c *journal.TCatalogRecord) { c.RefreshStatement = thrift.StringPtr("SELECT '{table}'") }), journal.TApplyCode_INVALID)
	wantCode(t, upd(func(c *journal.TCatalogRecord) { c.OptimizeUnindexedRows = thrift.Int64Ptr(-5) }), journal.TApplyCode_INVALID)
	h.unchanged(before)
	wantCode(t, upd(func(c *journal.TCatalogRecord) {
		c.RefreshKind, c.RefreshAddress, c.RefreshStatement, c.RefreshCredentialsRef =
			thrift.StringPtr(RefreshNone), thrift.StringPtr(""), thrift.StringPtr(""), thrift.StringPtr("")
		c.OptimizeUnindexedRows, c.OptimizeMinIntervalSecond = thrift.Int64Ptr(0), thrift.Int64Ptr(0)
	}), journal.TApplyCode_OK)
	c, _ = h.st().Catalog("lake")
	if c.RefreshKind != RefreshNone || c.RefreshAddress != "" || c.RefreshStatement != "" || c.RefreshCredentialsRef != "" ||
		c.OptimizeUnindexedRows != 0 || c.OptimizeMinIntervalSecond != 0 {
		t.Fatalf("cleared catalog = %+v", c)
	}
}

func TestCatalogRefreshFieldsSurviveSnapshot(t *testing.T) {
	h := newHarness(t)
	h.apply(CmdCreateCatalog, catalogCmd("doris", func(c *journal.TCatalogRecord) {
		mysqlCatalog(c)
		c.RefreshStatement = thrift.StringPtr("REFRESH TABLE {db}.{table}")
		c.OptimizeUnindexedRows, c.OptimizeMinIntervalSecond = thrift.Int64Ptr(7), thrift.Int64Ptr(90)
	}))
	f := restored(t, snapshotBytes(t, h.st()))
	sameView(t, h.st(), f.State())
	c, _ := f.State().Catalog("doris")
	if c.RefreshAddress != "fe1.example:9030" || c.RefreshStatement != "REFRESH TABLE {db}.{table}" ||
		c.RefreshCredentialsRef != "doris-refresh" || c.OptimizeUnindexedRows != 7 || c.OptimizeMinIntervalSecond != 90 {
		t.Fatalf("restored catalog = %+v", c)
	}
}

func TestExpandRefreshStatement(t *testing.T) {
	names := map[string]string{PlaceholderCatalog: "`c`", PlaceholderDB: "`d`", PlaceholderTable: "`t`"}
	value := func(p string) string { return names[p] }
	for tmpl, want := range map[string]string{
		DefaultRefreshStatement:                          "REFRESH TABLE `c`.`d`.`t`",
		"CREATE TABLE IF NOT EXISTS lm.{table} (x int)":  "CREATE TABLE IF NOT EXISTS lm.`t` (x int)",
		"SELECT '{x}', \"}\" -- {y}\n, {db} /* } */":     "SELECT '{x}', \"}\" -- {y}\n, `d` /* } */",
		"SELECT 'it''s', 'a\\\\' , {table}":              "SELECT 'it''s', 'a\\\\' , `t`",
		"REFRESH TABLE {catalog}.{db}.{table}\t# reload": "REFRESH TABLE `c`.`d`.`t`\t# reload",
	} {
		got, err := ExpandRefreshStatement(tmpl, value)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", tmpl, got, err, want)
		}
	}
	for name, tmpl := range map[string]string{
		"blank":                 "  \n",
		"unknown placeholder":   "REFRESH TABLE {tbl}",
		"stray brace":           "SELECT {",
		"stray close":           "SELECT }",
		"in single quotes":      "SELECT '{table}'",
		"in double quotes":      `SELECT "{db}"`,
		"in backticks":          "REFRESH TABLE `{table}`",
		"in a line comment":     "SELECT 1 -- {table}",
		"in a hash comment":     "SELECT 1 # {table}",
		"in a block comment":    "SELECT 1 /* {table} */",
		"escaped quote reading": `SELECT 'a\' {table} '`, // inside the string when backslash escapes apply
		"unclosed quote":        "SELECT 'abc",
		"unclosed comment":      "SELECT 1 /* abc",
		"control character":     "SELECT 1\x00",
		"too long":              "SELECT " + strings.Repeat("1", MaxRefreshStatementBytes),
		"too many placeholders": strings.Repeat("{table}", MaxRefreshPlaceholders+1),
		"invalid UTF-8":         "SELECT '\xff'",
	} {
		if err := ValidateRefreshStatement(tmpl); err == nil {
			t.Errorf("%s: %q accepted", name, tmpl)
		}
	}
}
