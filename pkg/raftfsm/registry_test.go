package raftfsm

import (
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// Catalogs, backends and options: the non-job commands.

func catalogCmd(name string, edit func(c *journal.TCatalogRecord)) *journal.TCatalogCommand {
	c := &journal.TCatalogRecord{Name: name, RootURI: thrift.StringPtr(testRoot)}
	if edit != nil {
		edit(c)
	}
	return &journal.TCatalogCommand{NowMs: 10, Catalog: c}
}

func TestCreateCatalog(t *testing.T) {
	h := newHarness(t)
	resp := h.apply(CmdCreateCatalog, catalogCmd("Lake", func(c *journal.TCatalogRecord) {
		c.CatalogID = 77 // allocated by the FSM, not the proposer
		c.RootURI = thrift.StringPtr("S3://bucket/warehouse/")
		c.CredentialsRef = thrift.StringPtr("lake-keys")
	}))
	wantCode(t, resp, journal.TApplyCode_OK)
	c, ok := h.st().Catalog("LAKE")
	if !ok || c.ID != 1 || resp.GetID() != 1 || c.Name != "Lake" || c.RootURI != testRoot ||
		c.Provider != "DIRECTORY" || c.RefreshKind != RefreshNone || c.CredentialsRef != "lake-keys" || c.CreateTimeMs != 10 {
		t.Fatalf("catalog = %+v", c)
	}
	if byID, _ := h.st().CatalogByID(1); byID != c {
		t.Fatalf("CatalogByID differs")
	}
	before := h.st()
	wantCode(t, h.apply(CmdCreateCatalog, catalogCmd("lake", nil)), journal.TApplyCode_ALREADY_EXISTS)
	for name, edit := range map[string]func(c *journal.TCatalogRecord){
		"bad name":         func(c *journal.TCatalogRecord) { c.Name = "a/b" },
		"no root":          func(c *journal.TCatalogRecord) { c.RootURI = nil },
		"relative root":    func(c *journal.TCatalogRecord) { c.RootURI = thrift.StringPtr("data/x") },
		"userinfo":         func(c *journal.TCatalogRecord) { c.RootURI = thrift.StringPtr("s3://k:s@bucket/x") },
		"provider":         func(c *journal.TCatalogRecord) { c.Provider = thrift.StringPtr("HIVE") },
		"refresh kind":     func(c *journal.TCatalogRecord) { c.RefreshKind = thrift.StringPtr("ftp") },
		"webhook, no URL":  func(c *journal.TCatalogRecord) { c.RefreshKind = thrift.StringPtr("webhook") },
		"URL, no webhook":  func(c *journal.TCatalogRecord) { c.RefreshURL = thrift.StringPtr("http://x") },
		"credentials path": func(c *journal.TCatalogRecord) { c.CredentialsRef = thrift.StringPtr("../x") },
	} {
		resp := h.apply(CmdCreateCatalog, catalogCmd("other", edit))
		if resp.Code != journal.TApplyCode_INVALID {
			t.Fatalf("%s: code %v", name, resp.Code)
		}
		if strings.Contains(resp.GetMessage(), "k:s") {
			t.Fatalf("%s: message echoes the URI", name)
		}
	}
	h.unchanged(before)
}

func TestUpdateCatalog(t *testing.T) {
	h, id, be := pendingFixture(t)
	rotate := h.apply(CmdUpdateCatalog, &journal.TCatalogCommand{NowMs: 20, Catalog: &journal.TCatalogRecord{
		Name: "LAKE", CredentialsRef: thrift.StringPtr("new-keys"),
		RefreshKind: thrift.StringPtr("webhook"), RefreshURL: thrift.StringPtr("https://hook")}})
	wantCode(t, rotate, journal.TApplyCode_OK)
	c, _ := h.st().Catalog("lake")
	if c.CredentialsRef != "new-keys" || c.RefreshURL != "https://hook" || c.RootURI != testRoot || c.UpdateTimeMs != 20 {
		t.Fatalf("rotated catalog = %+v", c)
	}
	reroot := &journal.TCatalogCommand{NowMs: 30, Catalog: &journal.TCatalogRecord{Name: "lake", RootURI: thrift.StringPtr("s3://other/root")}}
	before := h.st()
	wantCode(t, h.apply(CmdUpdateCatalog, reroot), journal.TApplyCode_CATALOG_IN_USE)
	wantCode(t, h.apply(CmdUpdateCatalog, catalogCmd("missing", nil)), journal.TApplyCode_NOT_FOUND)
	wantCode(t, h.apply(CmdUpdateCatalog, &journal.TCatalogCommand{NowMs: 40, Catalog: &journal.TCatalogRecord{Name: "lake"}}),
		journal.TApplyCode_OK) // unchanged: succeeds, changes nothing
	h.unchanged(before)
	// Resolve the job (complete + refresh done): the root may change.
	wantItem(t, h.complete(completion(h.run(id, be), job.PreInvocationStaleAdmission, false)), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdUpdateCatalog, reroot), journal.TApplyCode_OK)
	if c, _ := h.st().Catalog("lake"); c.RootURI != "s3://other/root" {
		t.Fatalf("root = %s", c.RootURI)
	}
}

func TestRemoveCatalog(t *testing.T) {
	h, id, _ := pendingFixture(t)
	before := h.st()
	wantCode(t, h.apply(CmdRemoveCatalog, &journal.TRemoveCatalogCommand{Name: "lake"}), journal.TApplyCode_CATALOG_IN_USE)
	wantCode(t, h.apply(CmdRemoveCatalog, &journal.TRemoveCatalogCommand{Name: "nope"}), journal.TApplyCode_NOT_FOUND)
	h.unchanged(before)
	wantCode(t, h.cancel(id), journal.TApplyCode_OK)
	// A retained (resolved) job does not keep its catalog.
	wantCode(t, h.apply(CmdRemoveCatalog, &journal.TRemoveCatalogCommand{Name: "LAKE"}), journal.TApplyCode_OK)
	if _, ok := h.st().Catalog("lake"); ok || len(h.st().Catalogs()) != 0 {
		t.Fatalf("catalog still present")
	}
	// Ids are never reused.
	if id := h.createCatalog("lake", testRoot); id != 2 {
		t.Fatalf("new catalog id = %d, want 2", id)
	}
}

func TestBackends(t *testing.T) {
	h, id, be := pendingFixture(t)
	if b, ok := h.st().BackendByAddress("BE1:9060"); !ok || b.ID != be {
		t.Fatalf("by address: %+v", b)
	}
	if bs := h.st().Backends(); len(bs) != 2 || bs[0].ID != 1 || bs[1].ID != 2 {
		t.Fatalf("backends = %+v", bs)
	}
	before := h.st()
	wantCode(t, h.apply(CmdAddBackend, &journal.TBackendCommand{Address: "be1:9060"}), journal.TApplyCode_ALREADY_EXISTS)
	for _, bad := range []string{"", "be1", "be1:0", "be1:x", ":9060", "be1:70000"} {
		wantCode(t, h.apply(CmdAddBackend, &journal.TBackendCommand{Address: bad}), journal.TApplyCode_INVALID)
	}
	wantCode(t, h.apply(CmdRemoveBackend, &journal.TRemoveBackendCommand{BackendID: 9}), journal.TApplyCode_NOT_FOUND)
	h.unchanged(before)

	r := h.run(id, be)
	before = h.st()
	wantCode(t, h.apply(CmdRemoveBackend, &journal.TRemoveBackendCommand{BackendID: be}), journal.TApplyCode_BACKEND_IN_USE)
	h.unchanged(before)
	// A result does not free the slot; a proof does.
	wantItem(t, h.complete(completion(r, job.PreInvocationStaleAdmission, false)), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdRemoveBackend, &journal.TRemoveBackendCommand{BackendID: be}), journal.TApplyCode_BACKEND_IN_USE)
	wantItem(t, h.proof(proofCmd(h.job(id), job.ProofChildReaped)), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdRemoveBackend, &journal.TRemoveBackendCommand{BackendID: be}), journal.TApplyCode_OK)
	if _, ok := h.st().Backend(be); ok {
		t.Fatalf("backend still registered")
	}
	if id := h.addBackend("be1:9060"); id != 3 {
		t.Fatalf("re-added backend id = %d, want 3", id)
	}
}

func TestSetOption(t *testing.T) {
	h := newHarness(t)
	if h.st().Options() != options.Resolve(nil) || len(h.st().OptionValues()) != 0 {
		t.Fatalf("defaults differ")
	}
	// The leader canonicalizes (options.Validate) before proposing;
	// Apply stores what the entry carries, verbatim.
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{Key: options.OptMaxUnresolvedGlobal, Value: "10"}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{Key: options.OptDispatcherPaused, Value: "true"}), journal.TApplyCode_OK)
	vals := h.st().OptionValues()
	if vals[options.OptMaxUnresolvedGlobal] != "10" || vals[options.OptDispatcherPaused] != "true" || len(vals) != 2 {
		t.Fatalf("stored = %v", vals)
	}
	if o := h.st().Options(); o.MaxUnresolvedGlobal != 10 || !o.DispatcherPaused {
		t.Fatalf("resolved = %+v", o)
	}
	vals["x"] = "y" // the caller's copy
	before := h.st()
	// Only the shape is Apply's business; nothing that a release could
	// know differently (which keys exist, which values parse).
	for _, bad := range []*journal.TSetOptionCommand{
		{Key: "", Value: "1"},
		{Key: "Upper_Case", Value: "1"},
		{Key: "with space", Value: "1"},
		{Key: strings.Repeat("k", options.MaxOptionKeyBytes+1), Value: "1"},
		{Key: options.OptMaxUnresolvedGlobal, Value: strings.Repeat("9", options.MaxOptionValueBytes+1)},
		{Key: options.OptMaxUnresolvedGlobal, Value: "1\n"},
	} {
		wantCode(t, h.apply(CmdSetOption, bad), journal.TApplyCode_INVALID)
	}
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{Key: options.OptMaxUnresolvedGlobal, Value: "10"}), journal.TApplyCode_OK)
	h.unchanged(before)
	if len(h.st().OptionValues()) != 2 {
		t.Fatalf("a caller's edit reached the state")
	}
	// A key this release does not know (a newer leader's) is stored
	// verbatim and read by nobody; a value that does not parse reads as
	// the default; every number is clamped where read.
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{Key: "lance_index_job_from_the_future", Value: "7"}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{Key: options.OptMaxDispatchPerRound, Value: "0"}), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdSetOption, &journal.TSetOptionCommand{Key: options.OptEnableMutation, Value: "maybe"}), journal.TApplyCode_OK)
	if v := h.st().OptionValues()["lance_index_job_from_the_future"]; v != "7" {
		t.Fatalf("unknown key stored as %q", v)
	}
	if o := h.st().Options(); o.MaxDispatchPerRound != 1 || !o.EnableMutation {
		t.Fatalf("resolved = %+v (want max_dispatch_per_round clamped to 1, an unparsable bool read as its default)", o)
	}
}
